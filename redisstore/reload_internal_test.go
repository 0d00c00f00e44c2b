package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestUnreachableTellsAFailureToReachRedisFromEveryOtherError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"NoError", nil, false},
		{"ConnectionRefused", refused, true},
		{"WrappedConnectionRefused", fmt.Errorf("redisstore: allow: %w", refused), true},
		{"ErrorReply", redis.Nil, false},
		{"ClosedClient", redis.ErrClosed, false},
		{"Canceled", context.Canceled, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, unreachable(tt.err))
		})
	}
}

func TestUnreachableOfNoErrorAllocatesNothing(t *testing.T) {
	// Asked of every call's error: a decision's allocations include it.
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = unreachable(nil) }))
}

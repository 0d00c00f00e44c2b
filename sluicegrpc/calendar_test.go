package sluicegrpc_test

import (
	"testing"
	"time"
	_ "time/tzdata" // Europe/Paris, wherever the test runs

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/sluice-go/sluice"
)

func TestCalendarQuotaRetriesAtLocalMidnightAndSendsEachDaysWindow(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, time.October, 24, 23, 59, 0, 0, paris)) // the next day has 25 hours
	quota, err := sluice.NewCalendarWindow(1, sluice.Day, paris, sluice.WithClock(mock))
	require.NoError(t, err)
	client, _ := limited(t, quota)

	require.Equal(t, called{code: codes.OK, policy: `"default";q=1;w=86400`, rateLimit: `"default";r=0;t=60`}, callAs(t, client, "k", false))
	require.Equal(t, called{code: codes.ResourceExhausted, policy: `"default";q=1;w=86400`, rateLimit: `"default";r=0;t=60`,
		retry: time.Minute, quota: 1}, callAs(t, client, "k", false), "retried at midnight in Paris")
	mock.Add(time.Minute)
	require.Equal(t, called{code: codes.OK, policy: `"default";q=1;w=90000`, rateLimit: `"default";r=0;t=90000`}, callAs(t, client, "k", false),
		"a day of 25 hours")
}

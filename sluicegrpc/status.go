package sluicegrpc

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
)

// denied returns the status of a call refused by decision d on key under
// the named policy: codes.ResourceExhausted with google.rpc.RetryInfo and
// google.rpc.QuotaFailure details.
func denied(key, policy string, f ratelimitheader.Fields, d sluice.Decision) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("sluicegrpc: rate limit exceeded; retry in %v", d.RetryAfter))
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     key,
			Description: fmt.Sprintf("%d of %d units left; the same call is admitted in %v", f.Remaining, f.Quota, d.RetryAfter),
			QuotaId:     policy,
			QuotaValue:  f.Quota,
		}}},
	)
	if err != nil { // only for a detail that cannot be marshaled
		return st.Err()
	}
	return withDetails.Err()
}

// unavailable returns the status of a call whose limiter failed:
// codes.Unavailable, with a google.rpc.RetryInfo of retry unless it is 0.
// The limiter's error goes to the error hook, not to the client, which
// has no use for the address of a store.
func unavailable(retry time.Duration) error {
	st := status.New(codes.Unavailable, "sluicegrpc: limiter unavailable")
	if retry <= 0 {
		return st.Err()
	}
	withDetails, detailErr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	if detailErr != nil {
		return st.Err()
	}
	return withDetails.Err()
}

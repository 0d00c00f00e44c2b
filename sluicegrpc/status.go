package sluicegrpc

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/ratelimitheader"
)

// denied returns the status of a call refused by decision d on key under
// policy p: codes.ResourceExhausted with google.rpc.RetryInfo and
// google.rpc.QuotaFailure details. The RetryInfo's delay is exact for a
// rate limit; for a concurrency limit it is the hint busy, capped at when
// the earliest lease expires, and left out for busy 0 (see
// [ratelimitheader.Policy.RetryDelay]).
func denied(key string, p *ratelimitheader.Policy, f ratelimitheader.Fields, d sluice.Decision, busy time.Duration) error {
	retry, send := p.RetryDelay(d, busy)
	msg := fmt.Sprintf("sluicegrpc: rate limit exceeded; retry in %v", retry)
	about := fmt.Sprintf("%d of %d units left; the same call is admitted in %v", f.Remaining, f.Quota, retry)
	if p.Concurrent() {
		msg = "sluicegrpc: too many concurrent calls"
		about = fmt.Sprintf("%d of %d concurrent calls free; a slot comes back when a call in flight ends", f.Remaining, f.Quota)
	}
	details := make([]protoadapt.MessageV1, 0, 2)
	if send {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	details = append(details, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     key,
		Description: about,
		QuotaId:     p.Name(),
		QuotaValue:  f.Quota,
	}}})
	st := status.New(codes.ResourceExhausted, msg)
	withDetails, err := st.WithDetails(details...)
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

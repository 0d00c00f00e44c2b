package sluicehttp

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
)

// ReadBody reads r's whole body for a cost function that needs all of it
// (to count the records of a batch), and puts an equivalent body back for
// the handler. A body longer than limit bytes is not read further: ReadBody
// then fails with an *[http.MaxBytesError], which the middleware answers
// 413 Content Too Large rather than 400.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if limit < 0 {
		return nil, fmt.Errorf("sluicehttp: negative body limit %d", limit)
	}
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	// One byte more than the limit tells a longer body from one that
	// fits exactly.
	b, err := io.ReadAll(io.LimitReader(r.Body, min(limit, math.MaxInt64-1)+1))
	r.Body = restored(b, r.Body)
	if err != nil {
		return b, err
	}
	if int64(len(b)) > limit {
		return b[:limit], &http.MaxBytesError{Limit: limit}
	}
	return b, nil
}

// PeekBody reads at most the first n bytes of r's body, for a cost
// function that needs only its start (a count in a fixed header, the
// first line), and puts them back in front of the rest, which stays unread
// until the handler reads it. A shorter body is returned whole.
func PeekBody(r *http.Request, n int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if n < 0 {
		return nil, fmt.Errorf("sluicehttp: negative peek length %d", n)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, n))
	r.Body = restored(b, r.Body)
	return b, err
}

// restored returns a body that yields read and then what is left of rest,
// and closes rest.
func restored(read []byte, rest io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), rest), rest}
}

package sluicehttp_test

import (
	"net/http"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Paris, wherever the test runs

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicehttp"
)

func TestCalendarQuotaTellsWhenItStartsAgainAtLocalMidnight(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, time.March, 28, 23, 59, 30, 0, paris)) // the next day has 23 hours
	quota, err := sluice.NewCalendarWindow(2, sluice.Day, paris, sluice.WithClock(mock))
	require.NoError(t, err)
	mw, err := sluicehttp.New(quota, sluicehttp.WithPolicyName("daily"), sluicehttp.WithLegacyHeaders())
	require.NoError(t, err)
	s := wrap(mw)

	w := s.get()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `"daily";q=2;w=86400`, w.Header().Get("RateLimit-Policy"))
	require.Equal(t, `"daily";r=1;t=30`, w.Header().Get("RateLimit"), "the day ends in 30 seconds")
	s.get()
	w = s.get()
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "30", w.Header().Get("Retry-After"))
	require.Equal(t, "30", w.Header().Get("X-RateLimit-Reset"), "seconds until midnight in Paris")

	mock.Add(30 * time.Second)
	w = s.get()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `"daily";q=2;w=82800`, w.Header().Get("RateLimit-Policy"), "a day of 23 hours")
	require.Equal(t, `"daily";r=1;t=82800`, w.Header().Get("RateLimit"))
}

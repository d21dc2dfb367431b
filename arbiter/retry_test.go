package arbiter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ralphloop/ralph/arbiter"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		jitter func(time.Duration) time.Duration
		want   []time.Duration // retries 1..n
	}{
		{name: "no jitter", jitter: func(time.Duration) time.Duration { return 0 },
			want: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{name: "full jitter", jitter: func(n time.Duration) time.Duration { return n - 1 },
			want: []time.Duration{time.Second - 1, 2*time.Second - 1, 4*time.Second - 1, 8*time.Second - 1, 10*time.Second - 1, 10*time.Second - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := arbiter.RetryPolicy{Base: time.Second, Max: 10 * time.Second, Jitter: tc.jitter}
			for i, want := range tc.want {
				if got := p.Backoff(i + 1); got != want {
					t.Errorf("Backoff(%d) = %s, want %s", i+1, got, want)
				}
			}
		})
	}
	p := arbiter.RetryPolicy{Base: time.Second, Max: 10 * time.Second}
	for n := 1; n < 200; n++ { // huge n must neither overflow nor leave [d/2, d)
		got := p.Backoff(n)
		d := min(time.Second<<min(n-1, 10), 10*time.Second)
		if got < d/2 || got >= d {
			t.Fatalf("Backoff(%d) = %s, outside [%s, %s)", n, got, d/2, d)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{name: "none", header: h()},
		{name: "nil", header: nil},
		{name: "seconds", header: h("Retry-After", "1"), want: time.Second, ok: true},
		{name: "fractional seconds", header: h("Retry-After", "0.5"), want: 500 * time.Millisecond, ok: true},
		{name: "http date", header: h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), want: 90 * time.Second, ok: true},
		{name: "http date in the past", header: h("Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)), want: 0, ok: true},
		{name: "milliseconds win", header: h("Retry-After-Ms", "250", "Retry-After", "1"), want: 250 * time.Millisecond, ok: true},
		{name: "openai reset headers", header: h("X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Tokens", "6m0s"), want: 6 * time.Minute, ok: true},
		{name: "garbage", header: h("Retry-After", "soon"), ok: false},
		{name: "negative", header: h("Retry-After", "-3"), ok: false},
		{name: "absurd", header: h("Retry-After", "1e300"), ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := arbiter.RetryAfter(tc.header, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RetryAfter = %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

package arbiter

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how a model-backed provider waits out transient
// failures. The zero value means the defaults; tests shrink the durations.
type RetryPolicy struct {
	// Retries is how many times a server error (5xx), a timeout or a
	// dropped connection is retried after the first attempt (default 5;
	// negative for none).
	Retries int
	// Base is the first backoff (default 1s); the n-th retry waits about
	// Base·2ⁿ⁻¹, capped at Max (default 30s), with jitter: a random
	// duration in [d/2, d).
	Base, Max time.Duration
	// MaxRetryAfter caps one rate-limit wait, however long the server's
	// Retry-After asks for (default 60s): the request is simply tried again
	// then, and the server says again how long to wait.
	MaxRetryAfter time.Duration
	// RateLimitBudget bounds the total time spent waiting on 429s for one
	// completion (default 10m). Rate-limit waits are not retries: they do
	// not use up Retries.
	RateLimitBudget time.Duration
	// Jitter returns a random duration in [0, n); nil uses math/rand/v2.
	Jitter func(n time.Duration) time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Retries == 0 {
		p.Retries = 5
	}
	if p.Retries < 0 {
		p.Retries = 0
	}
	if p.Base <= 0 {
		p.Base = time.Second
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = time.Minute
	}
	if p.RateLimitBudget <= 0 {
		p.RateLimitBudget = 10 * time.Minute
	}
	if p.Jitter == nil {
		p.Jitter = func(n time.Duration) time.Duration {
			if n <= 0 {
				return 0
			}
			return rand.N(n)
		}
	}
	return p
}

// Backoff is the wait before retry n (1-based): exponential from Base,
// capped at Max, with "equal jitter" — half fixed, half random — so
// clients that failed together do not retry together.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	d := p.Base
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d/2 + p.Jitter(d-d/2)
}

// RetryAfter reads how long a 429 (or 503) response asks the client to
// wait, from the headers servers use: retry-after-ms (OpenAI), Retry-After
// in seconds or as an HTTP date, then x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens (OpenAI, Go-style durations such as "6m0s" or
// "20ms"; the longer one wins). ok is false when none is usable.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && secs < 1e9 {
			return time.Duration(secs * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	var reset time.Duration
	found := false
	for _, k := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get(k))); err == nil && d >= 0 {
			reset, found = max(reset, d), true
		}
	}
	return reset, found
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

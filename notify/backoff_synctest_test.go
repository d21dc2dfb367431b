package notify

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ralphloop/ralph/config"
)

// answers is a webhook endpoint in the test's memory: it records when
// each attempt came and answers with the next status of codes (or waits
// out the request's context when there is none left).
type answers struct {
	codes []int
	at    []time.Duration
	start time.Time
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	a.at = append(a.at, time.Since(a.start))
	if len(a.codes) == 0 {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	code := a.codes[0]
	a.codes = a.codes[1:]
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// The webhook's retries follow its real schedule on the bubble's clock:
// the first retry 500 ms after a failed attempt, each next one twice as
// long after; a timeout costs each attempt its whole timeout; a
// cancellation ends the wait for the next retry at once.
func TestWebhookBackoffOnTheBubbleClock(t *testing.T) {
	three := 3
	send := func(t *testing.T, a *answers, timeout time.Duration, ctx context.Context) error {
		w, err := newWebhook(config.Notify{URL: "https://hooks.example/x", Timeout: config.Duration{Duration: timeout}, Retries: &three}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		w.client = &http.Client{Transport: a}
		a.start = time.Now()
		return w.Send(ctx, Event{Event: RunEnded})
	}
	want := func(t *testing.T, a *answers, at ...time.Duration) {
		t.Helper()
		if len(a.at) != len(at) {
			t.Fatalf("attempts at %v, want %v", a.at, at)
		}
		for i := range at {
			if a.at[i] != at[i] {
				t.Fatalf("attempts at %v, want %v", a.at, at)
			}
		}
	}
	t.Run("fails twice, then answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := &answers{codes: []int{503, 502, 200}}
			if err := send(t, a, time.Second, context.Background()); err != nil {
				t.Fatal(err)
			}
			want(t, a, 0, 500*time.Millisecond, 1500*time.Millisecond)
		})
	})
	t.Run("every attempt fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := &answers{codes: []int{503, 503, 503, 503}}
			err := send(t, a, time.Second, context.Background())
			if err == nil || !strings.Contains(err.Error(), "(after 4 attempts)") {
				t.Fatalf("err %v", err)
			}
			want(t, a, 0, 500*time.Millisecond, 1500*time.Millisecond, 3500*time.Millisecond)
		})
	})
	t.Run("a server that never answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := &answers{}
			err := send(t, a, 10*time.Second, context.Background())
			if err == nil || !strings.Contains(err.Error(), "did not answer within 10s (after 4 attempts)") {
				t.Fatalf("err %v", err)
			}
			// each attempt waits its 10 s, then the backoff
			want(t, a, 0, 10500*time.Millisecond, 21500*time.Millisecond, 33500*time.Millisecond)
		})
	})
	t.Run("cancelled while it waits to retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := &answers{codes: []int{503, 503}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- send(t, a, time.Second, ctx) }()
			time.Sleep(100 * time.Millisecond)
			synctest.Wait() // the first attempt failed; the sender waits for its retry
			cancel()
			err := <-done
			if err == nil || !strings.Contains(err.Error(), "retry cancelled") {
				t.Fatalf("err %v", err)
			}
			want(t, a, 0)
		})
	})
}

package agent

import (
	"testing"
	"time"
)

// A usage limit whose text names a time of day 10 s ago (read just after
// the reset, as Claude's "resets 9:59pm" at 21:59:10) lifts at the end of
// that minute, never tomorrow.
func TestClockResetJustPassed(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 59, 10, 0, time.UTC)
	l := claudeLimitText("You've hit your limit · resets 9:59pm (UTC)", now)
	if l == nil || l.Kind != LimitUsage {
		t.Fatalf("limit = %+v, want a usage limit", l)
	}
	if want := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC); !l.Reset.Equal(want) {
		t.Fatalf("reset = %v, want %v (the end of the named minute)", l.Reset, want)
	}
	if wait := l.Reset.Sub(now); wait > time.Minute {
		t.Fatalf("wait %v: a time 10 s ago must mean retry shortly", wait)
	}
	if l.Exact {
		t.Fatal("a time of day read from text is not exact")
	}
}

func TestClockResetPast(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 59, 10, 0, time.UTC)
	cases := []struct {
		text string
		want time.Time
	}{
		{"resets 10:30pm (UTC)", time.Date(2026, 11, 25, 22, 30, 0, 0, time.UTC)}, // ahead: as named
		{"resets 9:30pm (UTC)", time.Time{}},                                      // 29 min ago: unknown, retry after a short backoff
		{"resets 8:30pm (UTC)", time.Date(2026, 11, 26, 20, 30, 0, 0, time.UTC)},  // over an hour ago: tomorrow
	}
	for _, c := range cases {
		l := claudeLimitText("You've hit your limit · "+c.text, now)
		if l == nil || !l.Reset.Equal(c.want) {
			t.Errorf("%q: limit %+v, want reset %v", c.text, l, c.want)
		}
	}
	// Codex's "Try again at" reads the same way.
	if l := codexLimitText("You've hit your usage limit. Try again at 9:59 PM.", now.Local()); l == nil ||
		l.Reset.Sub(now) > time.Minute || l.Reset.Before(now) {
		t.Errorf("codex 10 s ago: %+v", l)
	}
}

// An exact reset (rate_limit_event.resetsAt) seen first is kept when the
// closing text gives only the minute.
func TestExactResetBeatsText(t *testing.T) {
	exact := time.Date(2026, 11, 25, 21, 59, 10, 0, time.UTC)
	a := &accumulator{o: &Options{}}
	a.add(Event{Kind: EventError, Text: "Claude usage limit reached (five_hour)",
		Limit: &Limit{Kind: LimitUsage, Reset: exact, Exact: true, Message: "Claude usage limit reached (five_hour)"}})
	text := "You've hit your limit · resets 9:59pm (UTC)"
	a.add(Event{Kind: EventError, Text: text, Limit: claudeLimitText(text, exact.Add(-time.Hour))})
	var r Result
	a.result(&r)
	if r.Limit == nil || !r.Limit.Reset.Equal(exact) || !r.Limit.Exact {
		t.Fatalf("limit = %+v, want the exact reset %v kept", r.Limit, exact)
	}
	if r.Limit.Message != text {
		t.Errorf("message = %q, want the later text", r.Limit.Message)
	}
	// A later exact reset replaces an earlier one.
	later := exact.Add(time.Hour)
	a.add(Event{Kind: EventError, Limit: &Limit{Kind: LimitUsage, Reset: later, Exact: true}})
	a.result(&r)
	if !r.Limit.Reset.Equal(later) {
		t.Errorf("reset = %v, want the later exact %v", r.Limit.Reset, later)
	}
}

// A retry notice of a 429 followed by a final 400 is that 400: no limit.
func TestRetryThenErrorIsTheError(t *testing.T) {
	a := &accumulator{o: &Options{}}
	a.add(Event{Kind: EventRetry, Retry: &Retry{Status: 429, Attempt: 1, Max: 5, Message: "Reconnecting... 1/5 (429 Too Many Requests)"}})
	a.add(Event{Kind: EventError, Text: "unexpected status 400 Bad Request: invalid_request_error"})
	var r Result
	a.result(&r)
	if r.Limit != nil {
		t.Fatalf("limit = %+v, want none: the final error is a 400", r.Limit)
	}
	if !r.IsError || len(r.Retries) != 1 {
		t.Fatalf("IsError %v retries %d", r.IsError, len(r.Retries))
	}
	// A rate limit read from text, then a plain error: the plain error.
	a = &accumulator{o: &Options{}}
	a.add(Event{Kind: EventError, Text: "429", Limit: &Limit{Kind: LimitRate}})
	a.add(Event{Kind: EventError, Text: "400 Bad Request"})
	a.result(&r)
	if r.Limit != nil {
		t.Fatalf("limit = %+v after a later plain error", r.Limit)
	}
}

func TestOverloadedIsTransient(t *testing.T) {
	for _, s := range []string{
		"unexpected status 503 Service Unavailable: {\"error\":{\"message\":\"The server is overloaded\"}}",
		"stream error: status: 529, overloaded",
	} {
		if l := codexLimitText(s, time.Now()); l == nil || l.Kind != LimitOverloaded {
			t.Errorf("%q: %+v, want overloaded", s, l)
		}
	}
	if l := claudeLimitText(`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, time.Now()); l == nil || l.Kind != LimitOverloaded {
		t.Errorf("claude 529: %+v", l)
	}
	if l := limitForStatus(503, "x"); l == nil || l.Kind != LimitOverloaded {
		t.Errorf("503: %+v", l)
	}
}

func TestGeminiDelayIsExact(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	l := geminiLimitText("You have exhausted your daily quota. Your quota will reset after 1h2m3s.", now)
	if l == nil || !l.Exact || !l.Reset.Equal(now.Add(time.Hour+2*time.Minute+3*time.Second)) {
		t.Fatalf("limit = %+v", l)
	}
}

func TestRetryLine(t *testing.T) {
	cases := []struct {
		r    Retry
		want string
	}{
		{Retry{Status: 429, Attempt: 3, Max: 10, Delay: 8 * time.Second}, "retrying after 429 (attempt 3/10, next in 8s)"},
		{Retry{Status: 529, Attempt: 2}, "retrying after 529 (attempt 2)"},
		{Retry{Delay: 1500 * time.Millisecond}, "retrying (next in 2s)"},
		{Retry{Delay: 300 * time.Millisecond}, "retrying (next in 300ms)"},
		{Retry{}, "retrying"},
		{Retry{Message: "AI_APICallError: Too Many Requests"}, "retrying: AI_APICallError: Too Many Requests"},
		{Retry{Status: 503, Message: "overloaded"}, "retrying after 503"},
	}
	for _, c := range cases {
		if got := RetryLine(c.r); got != c.want {
			t.Errorf("RetryLine(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestClockResetDatePast(t *testing.T) {
	now := time.Date(2026, 1, 30, 11, 30, 20, 0, time.UTC)
	if l := claudeLimitText("You've hit your limit · resets Jan 30, 11:30am (UTC)", now); l == nil ||
		!l.Reset.Equal(time.Date(2026, 1, 30, 11, 31, 0, 0, time.UTC)) {
		t.Errorf("in the named minute: %+v", l)
	}
	if l := claudeLimitText("You've hit your limit · resets Jan 30, 10:00am (UTC)", now); l == nil || !l.Reset.IsZero() {
		t.Errorf("a dated reset already past: %+v, want unknown", l)
	}
	if l := claudeLimitText("You've hit your limit · resets Jan 2, 10:00am (UTC)", time.Date(2026, 12, 30, 0, 0, 0, 0, time.UTC)); l == nil ||
		!l.Reset.Equal(time.Date(2027, 1, 2, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("next January: %+v", l)
	}
}

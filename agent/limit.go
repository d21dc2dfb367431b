package agent

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	// Limit messages name their reset's time zone ("resets 3:30am
	// (Asia/Calcutta)"); the embedded zone database reads it on machines
	// without one.
	_ "time/tzdata"
)

var (
	// "Claude AI usage limit reached|1762952400": the reset as unix seconds.
	claudeLimitEpoch = regexp.MustCompile(`(?i)usage limit reached\|(\d{9,11})`)
	// "… limit will reset at 9am (America/Chicago)", "resets 3:30am
	// (Asia/Calcutta)", "resets Jan 30, 11:30am (Asia/Calcutta)".
	resetClock = regexp.MustCompile(`(?i)\bresets?(?:\s+at)?\s+(?:([A-Z][a-z]{2}) (\d{1,2}), )?(\d{1,2})(?::(\d{2}))?\s*(am|pm)(?:\s*\(([^)]+)\))?`)
	// "You've hit your limit", "You've hit your session limit" (Claude
	// Code 2.1.197), "You've hit your 5-hour limit", "… weekly limit",
	// "… Opus limit", "… Sonnet limit", "… usage credit limit" (2.1.332,
	// which names the window).
	hitLimit = regexp.MustCompile(`(?i)hit your (?:[a-z0-9-]+ ){0,3}limit`)
)

// claudeLimitText recognises Claude Code's limit messages and the
// Anthropic API's rate-limit and overload errors in free text.
func claudeLimitText(s string, now time.Time) *Limit {
	if s == "" {
		return nil
	}
	msg := short(s)
	if m := claudeLimitEpoch.FindStringSubmatch(s); m != nil {
		secs, _ := strconv.ParseInt(m[1], 10, 64) // nine to eleven digits always fit
		return &Limit{Kind: LimitUsage, Reset: time.Unix(secs, 0), Exact: true, Message: msg}
	}
	lower := strings.ToLower(s)
	switch {
	case strings.Contains(lower, "usage limit") || hitLimit.MatchString(s):
		return &Limit{Kind: LimitUsage, Reset: clockReset(s, now), Message: msg}
	case strings.Contains(lower, "overloaded_error") || strings.Contains(lower, "api error: 529"):
		return &Limit{Kind: LimitOverloaded, Message: msg}
	case strings.Contains(lower, "rate_limit_error") || strings.Contains(lower, "api error: 429"):
		return &Limit{Kind: LimitRate, Reset: clockReset(s, now), Message: msg}
	}
	return nil
}

// clockReset reads a reset given as a time of day ("resets at 9am
// (America/Chicago)") as its next occurrence after now, or with a date
// ("resets Jan 30, 11:30am") as that date's next occurrence; zero when s
// gives none. An unknown time zone is read as now's.
func clockReset(s string, now time.Time) time.Time {
	m := resetClock.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}
	}
	hour, _ := strconv.Atoi(m[3]) // one or two digits
	minute := 0
	if m[4] != "" {
		minute, _ = strconv.Atoi(m[4]) // two digits
	}
	if hour < 1 || hour > 12 || minute > 59 {
		return time.Time{}
	}
	hour %= 12
	if strings.EqualFold(m[5], "pm") {
		hour += 12
	}
	loc := now.Location()
	if m[6] != "" {
		if l, err := time.LoadLocation(m[6]); err == nil {
			loc = l
		}
	}
	n := now.In(loc)
	if m[1] != "" {
		day, err := time.ParseInLocation("Jan 2 2006", m[1]+" "+m[2]+" "+strconv.Itoa(n.Year()), loc)
		if err != nil {
			return time.Time{}
		}
		t := time.Date(day.Year(), day.Month(), day.Day(), hour, minute, 0, 0, loc)
		if t.Before(n.AddDate(0, -6, 0)) {
			return t.AddDate(1, 0, 0) // "resets Jan 2" read in late December
		}
		switch {
		case t.After(n):
			return t
		case n.Before(t.Add(time.Minute)):
			return t.Add(time.Minute) // the named minute is running
		}
		return time.Time{} // a date already past: unknown, retry after a backoff
	}
	return clockNext(time.Date(n.Year(), n.Month(), n.Day(), hour, minute, 0, 0, loc), n)
}

// clockPast is how far a limit's time of day may lie behind now and
// still be today's: a message read just after its reset names a time
// already past, which means "retry shortly", never "tomorrow".
const clockPast = time.Hour

// clockNext is when a limit that lifts at today's time of day t (minute
// precision: it lifts within that minute) lifts, seen at now: t while it
// is ahead; the end of t's minute while now is in it; zero (unknown: the
// loop retries after a short backoff) when t passed less than clockPast
// ago; else the same time tomorrow.
func clockNext(t, now time.Time) time.Time {
	switch {
	case t.After(now):
		return t
	case now.Before(t.Add(time.Minute)):
		return t.Add(time.Minute)
	case now.Sub(t) < clockPast:
		return time.Time{}
	}
	return t.AddDate(0, 0, 1)
}

var (
	// Codex's "Try again at 3:28 PM." (today) and "try again at Aug 8th,
	// 2026 12:30 PM." (another day), in the local time zone.
	codexAgainClock = regexp.MustCompile(`(?i)try again at (\d{1,2}):(\d{2}) ([AP]M)`)
	codexAgainDate  = regexp.MustCompile(`(?i)try again at ([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th), (\d{4}) (\d{1,2}):(\d{2}) ([AP]M)`)
)

// codexLimitText recognises Codex's usage-limit, quota, retry-limit and
// high-demand errors.
func codexLimitText(s string, now time.Time) *Limit {
	if s == "" {
		return nil
	}
	msg := short(s)
	lower := strings.ToLower(s)
	switch {
	case strings.Contains(lower, "hit your usage limit"):
		return &Limit{Kind: LimitUsage, Reset: codexClockReset(s, now), Message: msg}
	case strings.Contains(lower, "quota exceeded"):
		return &Limit{Kind: LimitUsage, Message: msg}
	case strings.Contains(lower, "exceeded retry limit, last status: 429"):
		return &Limit{Kind: LimitRate, Message: msg}
	case strings.Contains(lower, "experiencing high demand") || overloadedText(lower):
		return &Limit{Kind: LimitOverloaded, Message: msg}
	}
	return nil
}

// overloadedText recognises an overloaded service in lower-case text: a
// 503 or 529 status, or the word "overloaded".
func overloadedText(lower string) bool {
	return strings.Contains(lower, "overloaded") || strings.Contains(lower, "503 service unavailable") ||
		strings.Contains(lower, "status: 503") || strings.Contains(lower, "status 503") ||
		strings.Contains(lower, "status: 529") || strings.Contains(lower, "status 529")
}

// codexReset reads the dated "try again at Aug 8th, 2026 12:30 PM." in the
// local time zone; zero when s names no date (codexClockReset reads the rest).
func codexReset(s string, now time.Time) time.Time {
	m := codexAgainDate.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}
	}
	t, err := time.ParseInLocation("Jan 2 2006 3:04 PM", m[1]+" "+m[2]+" "+m[3]+" "+m[4]+":"+m[5]+" "+strings.ToUpper(m[6]), now.Location())
	if err != nil {
		return time.Time{}
	}
	return t
}

var (
	// Gemini: "Your quota will reset after 2h52m39s.", "Please retry in
	// 34.07s", "Suggested retry after 60s."
	geminiResetAfter = regexp.MustCompile(`(?i)reset after ((?:\d+h)?(?:\d+m)?(?:[\d.]+s)?)`)
	geminiRetryIn    = regexp.MustCompile(`(?i)(?:retry in|retry after) ([\d.]+(?:ms|s))`)
)

// geminiLimitText recognises Gemini CLI's quota errors (terminal: the
// daily quota or capacity is exhausted; retryable: a per-minute limit or a
// suggested retry delay) and the API's capacity errors.
func geminiLimitText(s string, now time.Time) *Limit {
	if s == "" {
		return nil
	}
	msg := short(s)
	lower := strings.ToLower(s)
	// A delay counted from now is exact: it names the reset to the second.
	limit := func(kind string, re *regexp.Regexp) *Limit {
		l := &Limit{Kind: kind, Message: msg}
		if m := re.FindStringSubmatch(s); m != nil && m[1] != "" {
			if d, err := time.ParseDuration(m[1]); err == nil && d > 0 {
				l.Reset, l.Exact = now.Add(d), true
			}
		}
		return l
	}
	switch {
	case strings.Contains(lower, "exhausted your daily quota") || strings.Contains(lower, "exhausted your capacity") ||
		strings.Contains(lower, "quota_exhausted"):
		return limit(LimitUsage, geminiResetAfter)
	case strings.Contains(lower, "no capacity available") || strings.Contains(lower, "model_capacity_exhausted") ||
		strings.Contains(lower, "model is overloaded"):
		return limit(LimitOverloaded, geminiRetryIn)
	case strings.Contains(lower, "resource_exhausted") || strings.Contains(lower, "rate_limit_exceeded") ||
		strings.Contains(lower, "ratelimitexceeded") || strings.Contains(lower, "too many requests") ||
		geminiRetryIn.MatchString(s):
		return limit(LimitRate, geminiRetryIn)
	}
	return nil
}

// opencodeLimitText recognises the limit messages of the providers
// OpenCode talks to (it passes their errors through).
func opencodeLimitText(s string, now time.Time) *Limit {
	for _, f := range []func(string, time.Time) *Limit{claudeLimitText, codexLimitText, geminiLimitText} {
		if l := f(s, now); l != nil {
			return l
		}
	}
	return nil
}

// limitForStatus reads an HTTP status an API error carried.
func limitForStatus(status int, msg string) *Limit {
	switch status {
	case 429:
		return &Limit{Kind: LimitRate, Message: short(msg)}
	case 503, 529:
		return &Limit{Kind: LimitOverloaded, Message: short(msg)}
	}
	return nil
}

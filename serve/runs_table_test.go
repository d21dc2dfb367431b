package serve

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0s"},
		{430 * time.Millisecond, "0.4s"},
		{12345 * time.Millisecond, "12.3s"},
		{59*time.Minute + 59700*time.Millisecond, "60m00s"},
		{4*time.Minute + 5*time.Second, "4m05s"},
		{2*time.Hour + 7*time.Minute + 10*time.Second, "2h07m"},
		{76 * time.Hour, "3d04h"},
	} {
		if got := shortDuration(c.d); got != c.want {
			t.Errorf("shortDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestStartedColumn(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 0, 0, 0, time.Local)
	today := now.Add(-time.Hour).UTC().Format(time.RFC3339)
	if got := startedColumn(today, now); got != "14:00:00" {
		t.Errorf("today: %q", got)
	}
	earlier := now.Add(-48 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if got := startedColumn(earlier, now); got != "2026-11-24 15:00" {
		t.Errorf("two days ago: %q", got)
	}
	if got := startedColumn("", now); got != "-" {
		t.Errorf("no start: %q", got)
	}
}

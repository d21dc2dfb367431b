package cli

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/serve"
)

// startedColumn is a run's start as `ralph runs` shows it, in local time:
// the time of day for a run started today, else the date and minute; "-"
// when the record has no start.
func startedColumn(started string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, started)
	if err != nil {
		return "-"
	}
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); now.Year() == y && now.Month() == m && now.Day() == d {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

// durationColumn is how long a run ran as `ralph runs` shows it.
func durationColumn(r serve.RunRow) string {
	if _, err := time.Parse(time.RFC3339, r.Started); err != nil {
		return "-"
	}
	return shortDuration(time.Duration(r.DurationMS) * time.Millisecond)
}

// shortDuration says d in at most two units: 0.4s, 12.3s, 4m05s, 2h07m,
// 3d04h.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

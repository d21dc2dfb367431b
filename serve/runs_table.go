package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ralphloop/ralph/loop"
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
func durationColumn(r RunRow) string {
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

// WriteRuns prints the runs as `ralph runs` does: a table, or with asJSON
// one RunRow per line (the same fields as GET /v1/runs). live is the
// process serving the store (nil when this process opened it).
func WriteRuns(w io.Writer, runs []loop.RunRecord, live *Info, asJSON bool) error {
	now := time.Now()
	rows, depth := nestBatches(RunRows(runs, live, now))
	anyLive := false
	for _, r := range rows {
		anyLive = anyLive || r.Attached != nil
	}
	if asJSON {
		for _, r := range rows {
			b, _ := json.Marshal(r) // plain strings, numbers and bools cannot fail to marshal
			if err := writeOut(w, string(b)+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "RUN\tSTATE\tSTARTED\tDURATION\tITER\tCOST\tSTOPPED BY\tREASON"
	if anyLive {
		head += "\tPID\tUI\tLOG"
	}
	fmt.Fprintln(tw, head)
	for i, r := range rows {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%d\t$%.4f\t%s\t%s", strings.Repeat("  ", depth[i]), r.ID, r.State, startedColumn(r.Started, now), durationColumn(r), r.Iterations, r.CostUSD, r.Condition, r.Reason)
		if r.Attached != nil {
			ui := "none"
			if *r.Attached {
				ui = "attached"
			}
			log := r.LogFile
			if log == "" {
				log = "-"
			}
			fmt.Fprintf(tw, "\t%d\t%s\t%s", r.PID, ui, log)
		} else if anyLive {
			fmt.Fprint(tw, "\t\t\t")
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// nestBatches orders rows so that each batch's task runs (RunRecord.Batch)
// follow its own row, in their order, and says how deep each row is: 1
// for a task's run under its batch, 0 for the rest. A task run whose
// batch has no row keeps its place, at depth 0.
func nestBatches(rows []RunRow) ([]RunRow, []int) {
	has := make(map[string]bool, len(rows))
	for _, r := range rows {
		has[r.ID] = true
	}
	kids := map[string][]RunRow{}
	for _, r := range rows {
		if r.Batch != "" && r.Batch != r.ID && has[r.Batch] {
			kids[r.Batch] = append(kids[r.Batch], r)
		}
	}
	out := make([]RunRow, 0, len(rows))
	depth := make([]int, 0, len(rows))
	for _, r := range rows {
		if r.Batch != "" && r.Batch != r.ID && has[r.Batch] {
			continue // under its batch
		}
		out, depth = append(out, r), append(depth, 0)
		for _, k := range kids[r.ID] {
			out, depth = append(out, k), append(depth, 1)
		}
	}
	return out, depth
}

// writeOut writes s to w; a failure says it was the output's.
func writeOut(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

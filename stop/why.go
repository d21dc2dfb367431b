package stop

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Why is the one line that says why r stands where it does, for the places
// people look first (a condition's row, the history, the headless brief):
//
//   - a check that could not run: "error: " and its first line;
//   - a command (tests): the first failing Go test and its message
//     ("FAIL TestAdd calc_test.go:7: Add(2, 3) = -1, want 5"), else the first
//     compiler error or panic, else the first line of output, else the reason;
//   - a predicate that does not hold: the first query that returned false;
//   - file and output conditions: the first line of their evidence;
//   - limits, counters and composites, whose evidence repeats their figure:
//     the reason ("2 of 3 consecutive failures").
//
// The line is plain text, cleaned of control characters, never empty when r
// says anything at all.
func Why(r *Result) string {
	if r.Err != "" {
		return "error: " + firstMeaningful(r.Err)
	}
	var s string
	if k, ok := Lookup(r.Kind); ok && k.Why != nil {
		s = k.Why(r)
	}
	if s == "" {
		s = firstMeaningful(r.Reason)
	}
	if s == "" {
		s = firstMeaningful(r.Evidence)
	}
	return s
}

// evidenceWhy is the first line of r's evidence (file and output
// conditions).
func evidenceWhy(r *Result) string { return firstMeaningful(r.Evidence) }

// commandWhy reads a command condition's evidence ("$ CMD\nexit N\nOUTPUT").
func commandWhy(r *Result) string {
	lines := strings.Split(r.Evidence, "\n")
	out := lines
	if len(lines) >= 2 && strings.HasPrefix(lines[0], "$ ") && strings.HasPrefix(lines[1], "exit ") {
		out = lines[2:]
	} else if len(lines) > 1 {
		out = lines[1:] // a command that did not finish: its line, then its output
	}
	if r.Met {
		return firstMeaningful(r.Reason)
	}
	return OutputWhy(strings.Join(out, "\n"))
}

var (
	goFailRE    = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	goMsgRE     = regexp.MustCompile(`^\s+(\S+\.go:\d+: .*)$`)
	goBuildRE   = regexp.MustCompile(`^\S+\.go:\d+(:\d+)?: .+`)
	goPanicRE   = regexp.MustCompile(`^panic: .+`)
	goNoTestsRE = regexp.MustCompile(`\[no tests to run\]`)
)

// OutputWhy is the line of a test command's output that says most about
// why it failed: the first failing Go test with its first message, a
// compiler error, a panic, "[no tests to run]", else the first meaningful
// line; "" for no output.
func OutputWhy(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "…") // where the output was cut
	}
	for i, l := range lines {
		m := goFailRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		why := "FAIL " + m[1]
		for _, next := range lines[i+1:] {
			if goFailRE.MatchString(next) || !strings.HasPrefix(next, " ") && !strings.HasPrefix(next, "\t") {
				break
			}
			if mm := goMsgRE.FindStringSubmatch(next); mm != nil {
				return clean(why + " " + strings.TrimSpace(mm[1]))
			}
		}
		return why
	}
	for _, re := range []*regexp.Regexp{goPanicRE, goBuildRE} {
		for _, l := range lines {
			if re.MatchString(l) {
				return clean(strings.TrimSpace(l))
			}
		}
	}
	for _, l := range lines {
		if goNoTestsRE.MatchString(l) {
			return clean(strings.TrimSpace(l))
		}
	}
	return firstMeaningful(out)
}

// predicateWhy is, for a predicate that does not hold, the first query of
// its evidence that returned false ("" when none did: the reason, with the
// predicate's source, says more); for one that holds, the first query.
func predicateWhy(ev string, met bool) string {
	if met {
		return firstMeaningful(ev)
	}
	for _, l := range strings.Split(ev, "\n") {
		if strings.Contains(l, "→ false") {
			return clean(strings.TrimSpace(l))
		}
	}
	return ""
}

// firstMeaningful is the first line of s with a letter or digit in it,
// without the "…" that marks a cut and surrounding space.
func firstMeaningful(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "…"))
		if strings.IndexFunc(l, isWordRune) >= 0 {
			return clean(l)
		}
	}
	return ""
}

func isWordRune(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
}

var escRE = regexp.MustCompile("\x1b(\\[[0-?]*[ -/]*[@-~]|\\][^\x07\x1b]*(\x07|\x1b\\\\)?|.)")

// clean drops escape sequences and control characters, so the line is
// safe to print on a terminal, and folds runs of space into one.
func clean(s string) string {
	s = escRE.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// commandTail is the output a command condition keeps as evidence: its
// last n bytes and, when the first failing Go test was cut off with the
// rest, that test's first lines before them, so Why still names it.
func commandTail(out string, n int) string {
	t := tail(out, n)
	if len(t) == len(out) {
		return t
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !goFailRE.MatchString(l) {
			continue
		}
		if strings.Contains(t, l) {
			return t
		}
		j := i + 1
		for j < len(lines) && j < i+4 && (strings.HasPrefix(lines[j], " ") || strings.HasPrefix(lines[j], "\t")) &&
			!goFailRE.MatchString(lines[j]) {
			j++
		}
		head := strings.Join(lines[i:j], "\n")
		if len(head) > n {
			head = head[:n]
		}
		return head + "\n" + t
	}
	return t
}

// Brief is one iteration in one line, as headless runs print it after the
// iteration's actions (ralph run --brief prints only these):
//
//	it 3/20 done 1m12s +$0.14 ($0.42, 4% of budget) · tests: FAIL TestAdd calc_test.go:7: …
type Brief struct {
	Iteration, MaxIterations int    // MaxIterations 0: no limit
	Status                   string // the iteration's status as recorded ("ok", "failed", "skipped", …)
	Duration                 time.Duration
	Cost, Total, Budget      float64 // this iteration's spend, the run's, and the max_cost (0: none)
	Eval                     *Evaluation
}

// String is the line: the iteration, how it ended, how long it took, what
// it cost, then the conditions' whys (Brief.Whys).
func (b Brief) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "it %d", b.Iteration)
	if b.MaxIterations > 0 {
		fmt.Fprintf(&s, "/%d", b.MaxIterations)
	}
	status := b.Status
	if status == "ok" || status == "" {
		status = "done"
	}
	s.WriteString(" " + status + " " + briefDur(b.Duration))
	switch {
	case b.Budget > 0:
		fmt.Fprintf(&s, " +$%.2f ($%.2f, %d%% of budget)", b.Cost, b.Total, int(b.Total/b.Budget*100))
	case b.Total > 0:
		fmt.Fprintf(&s, " +$%.2f ($%.2f)", b.Cost, b.Total)
	}
	if w := b.Whys(); w != "" {
		s.WriteString(" · " + w)
	}
	return s.String()
}

// Whys says where the conditions stand after the iteration, in one line:
// the condition that stops the run ("stop: stuck (failure): nothing
// changed for 3 iterations"), followed, when that stop is not a success,
// by each success condition that still does not hold; else each success
// condition that does not hold yet ("tests: FAIL TestAdd …"), else the
// condition closest to firing with its detail.
func (b Brief) Whys() string {
	ev := b.Eval
	if ev == nil {
		return ""
	}
	unmet := UnmetText(ev.Unmet())
	if t := ev.Trigger(); ev.ShouldStop && t != nil {
		s := fmt.Sprintf("stop: %s (%s): %s", t.Name, t.Class, Why(t))
		if t.Class != ClassSuccess && unmet != "" {
			s += " · " + unmet
		}
		return s
	}
	if unmet != "" {
		return unmet
	}
	best := -1
	for i := range ev.Results {
		r := &ev.Results[i]
		if !r.Met && (best < 0 || r.Progress > ev.Results[best].Progress) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	r := &ev.Results[best]
	return fmt.Sprintf("closest: %s %d%% (%s)", r.Name, Percent(r.Progress, r.Met), r.Detail)
}

// Unmet is a success condition that does not hold, and why (Why).
type Unmet struct {
	Condition string `json:"condition"`
	Why       string `json:"why"`
}

// Unmet lists the success conditions of ev that do not hold, in priority
// order, each with its why: what a run that stops here without success
// still fails.
func (ev *Evaluation) Unmet() []Unmet {
	var u []Unmet
	for i := range ev.Results {
		if r := &ev.Results[i]; r.Class == ClassSuccess && !r.Met {
			u = append(u, Unmet{Condition: r.Name, Why: Why(r)})
		}
	}
	return u
}

// UnmetText is u in one line: "tests: FAIL TestAdd … · lint: …"; "" for none.
func UnmetText(u []Unmet) string {
	parts := make([]string, len(u))
	for i, x := range u {
		parts[i] = x.Condition + ": " + x.Why
	}
	return strings.Join(parts, " · ")
}

// briefDur is d as a person reads it: 944ms, 12s, 1m12s, 1h05m.
func briefDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

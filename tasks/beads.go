package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// The beads source reads a Beads tracker through its CLI, as ralph-tui's
// beads tracker does: `bd list --json --all --limit 0` lists every issue,
// closed ones too, so that a dependency on a closed one is known to be
// met. Its JSON is documented in steveyegge/beads docs/JSON_SCHEMA.md
// (a bare array, or {"schema_version":1,"data":[…]} with
// BD_JSON_ENVELOPE=1) and built from internal/types/types.go's Issue and
// IssueWithCounts: "id", "title", "description", "acceptance_criteria"
// (one string), "status" (open, in_progress, blocked, deferred, closed,
// pinned, hooked, or a custom one), "priority" (0-4, 0 the most urgent),
// "issue_type", and "dependencies", each {"issue_id", "depends_on_id",
// "type"} (bd show's shape, {"id", "dependency_type"}, is read too).
// Marking done runs `bd close ID --reason …` in the merge checkout.

// beadsBlocking are the dependency types that keep an issue from being
// worked on until the other one closes (types.go's IsBlockingEdge:
// parent-child is structure, the others are links).
var beadsBlocking = map[string]bool{"blocks": true, "conditional-blocks": true, "waits-for": true}

// beadsNotWork are issue types that are no agent's work: those bd ready
// leaves out (internal/storage/domain/db/ready_work.go), and epics, whose
// children are the work.
var beadsNotWork = map[string]bool{
	"merge-request": true, "gate": true, "molecule": true, "message": true,
	"agent": true, "role": true, "rig": true, "epic": true,
}

// bead is the part of bd's issue JSON the source reads.
type bead struct {
	ID                 string    `json:"id"`
	Title              string    `json:"title"`
	Description        string    `json:"description"`
	AcceptanceCriteria string    `json:"acceptance_criteria"`
	Status             string    `json:"status"`
	Priority           *int      `json:"priority"`
	IssueType          string    `json:"issue_type"`
	Dependencies       []beadDep `json:"dependencies"`
}

// beadDep is a dependency as bd list gives it (issue_id, depends_on_id,
// type) or as bd show does (the other issue's id, dependency_type).
type beadDep struct {
	IssueID        string `json:"issue_id"`
	DependsOnID    string `json:"depends_on_id"`
	Type           string `json:"type"`
	ID             string `json:"id"`
	DependencyType string `json:"dependency_type"`
}

// on is the id the dependency waits for, if it is a blocking one of the
// issue id's.
func (d beadDep) on(id string) (string, bool) {
	if d.DependsOnID != "" {
		return d.DependsOnID, beadsBlocking[d.Type] && (d.IssueID == "" || d.IssueID == id)
	}
	return d.ID, d.ID != "" && beadsBlocking[d.DependencyType]
}

// beadsSource is the Beads tracker bd finds from the repository.
type beadsSource struct {
	spec Spec
	root string
	bd   string
}

func openBeads(s Spec, o Options) (Source, error) {
	if o.Root == "" {
		return nil, errors.New("no repository root given (Options.Root)")
	}
	bd := o.BD
	if bd == "" {
		bd = "bd"
	}
	return &beadsSource{spec: s, root: o.Root, bd: bd}, nil
}

func (b *beadsSource) Kind() *Kind    { return b.spec.Kind }
func (b *beadsSource) String() string { return b.spec.String() }
func (b *beadsSource) File() string   { return "" }
func (b *beadsSource) Branch() string { return "" }

// List runs bd list and reads its issues.
func (b *beadsSource) List(ctx context.Context) ([]Task, error) {
	out, err := b.run(ctx, b.root, "list", "--json", "--all", "--limit", "0")
	if err != nil {
		return nil, err
	}
	return parseBeads(out)
}

// parseBeads reads bd list --json's output.
func parseBeads(out []byte) ([]Task, error) {
	var beads []bead
	data := bytes.TrimSpace(out)
	if bytes.HasPrefix(data, []byte("{")) {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(data, &env); err != nil || env.Data == nil {
			return nil, fmt.Errorf("bd list --json printed an object that is not bd's envelope {\"schema_version\", \"data\"}: is bd too old or too new?")
		}
		data = env.Data
	}
	if err := json.Unmarshal(data, &beads); err != nil {
		return nil, fmt.Errorf("bd list --json printed what is not its array of issues (%v): is bd too old or too new?", err)
	}
	known := map[string]bool{}
	for i, bd := range beads {
		if bd.ID == "" {
			return nil, fmt.Errorf("bd list --json: issue %d has no id", i+1)
		}
		known[bd.ID] = true
	}
	ts := make([]Task, len(beads))
	for i, bd := range beads {
		ts[i] = beadTask(i, bd, known)
	}
	return ts, nil
}

// beadTask is bead i as a task.
func beadTask(i int, bd bead, known map[string]bool) Task {
	t := Task{
		ID: bd.ID, Title: bd.Title, Text: bd.Description, Criteria: criteriaLines(bd.AcceptanceCriteria),
		Index: i, Done: bd.Status == "closed", Pos: Pos{File: "beads " + bd.ID},
	}
	if bd.Priority != nil {
		t.Priority, t.HasPriority = *bd.Priority, true
	}
	switch {
	case t.Done:
	case beadsNotWork[bd.IssueType]:
		t.Held = "it is " + article(bd.IssueType) + ", not a piece of work"
	case bd.Status != "open":
		t.Held = "its status is " + bd.Status
	}
	for _, d := range bd.Dependencies {
		on, ok := d.on(bd.ID)
		if !ok {
			continue
		}
		if !known[on] {
			t.Held = joinHeld(t.Held, "it waits on "+on+", which bd list does not show")
			continue
		}
		t.DependsOn = append(t.DependsOn, on)
	}
	return t
}

// article is "a type" or "an type".
func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// bullet is a Markdown list item's marker (and task box) at a line's start.
var bullet = regexp.MustCompile(`^(?:[-*+]|[0-9]{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?`)

// criteriaLines splits a bead's acceptance_criteria, one string, into
// criteria: each list item one (a line under an item continues it), or
// the whole text as one when it has no list.
func criteriaLines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var out []string
	items := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch loc := bullet.FindStringIndex(l); {
		case l == "":
		case loc != nil:
			out, items = append(out, strings.TrimSpace(l[loc[1]:])), true
		case items:
			out[len(out)-1] += " " + l
		default:
			out = append(out, l)
		}
	}
	if !items {
		return []string{s}
	}
	return out
}

// MarkDone closes the task's issue with bd close, run in dir so that
// what bd writes is written from the merge checkout.
func (b *beadsSource) MarkDone(ctx context.Context, dir string, t Task) error {
	if t.ID == "" || strings.HasPrefix(t.ID, "-") {
		return fmt.Errorf("%q is not a bead's id", t.ID)
	}
	reason := "Merged by ralph: its success conditions held on the merged tree"
	if n, ok := noteFrom(ctx); ok && n.Batch != "" {
		reason += " (batch " + n.Batch + ")"
	}
	_, err := b.run(ctx, dir, "close", t.ID, "--reason", reason)
	return err
}

// maxBDOutput bounds what bd may print on standard output.
const maxBDOutput = 64 << 20

// run runs bd with args in dir and returns its standard output.
func (b *beadsSource) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.bd, args...)
	cmd.Dir = dir
	stdout := &procgroup.CappedBuffer{Limit: maxBDOutput}
	stderr := &procgroup.TailBuffer{Limit: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := procgroup.Run(cmd, 5*time.Second)
	line := "bd " + strings.Join(args, " ")
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: bd is not installed (or not on PATH): install Beads (github.com/steveyegge/beads) or put its bd on PATH", line)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", line, ctx.Err())
	case err != nil:
		said := strings.TrimSpace(stderr.String())
		if said == "" {
			said = "it printed nothing on stderr"
		}
		return nil, fmt.Errorf("%s: %v: %s", line, err, lastLine(said))
	case stdout.Truncated:
		return nil, fmt.Errorf("%s: it printed over %d MiB", line, maxBDOutput>>20)
	}
	return []byte(stdout.String()), nil
}

// lastLine is the last line of s.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

package tasks

import "fmt"

// Pos is where in its source a task (or a bad part of one) is: a file,
// line and column for a file source; for a remote source File names it
// (an issue's URL, "bd") and Line and Col are 0.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	switch {
	case p.Line > 0 && p.Col > 0:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

// Task is one item of a backlog, as its source lists it.
type Task struct {
	// ID is the task's id in its source (a story's "id", an issue's
	// number, a bead's id, a checklist item's number); Ref is it made safe
	// as one component of a git ref name (RefName).
	ID string
	// Title, Text and Criteria are what the task's prompt carries: its
	// title, its description and its acceptance criteria.
	Title    string
	Text     string
	Criteria []string
	// Priority orders ready tasks: lower first. HasPriority is false when
	// the source gave none (such a task comes after those with one).
	Priority    int
	HasPriority bool
	// DependsOn are the ids of the tasks this one waits for.
	DependsOn []string
	// Index is the task's place in its source (file order), from 0.
	Index int
	// Done says the source already has the task done (passes: true, a
	// ticked box, a closed issue or bead): a batch skips it.
	Done bool
	// Held, when not empty, says why the source keeps the task from being
	// started now (a bead another worker has in progress, a deferred one,
	// an issue blocked by one outside the backlog). A held task is never
	// run; the tasks that depend on it wait (Order, Ready).
	Held string
	// Pos is where the task is in its source.
	Pos Pos
}

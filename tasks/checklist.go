package tasks

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A checklist is a Markdown file whose task list items (GitHub Flavored
// Markdown's "- [ ] text" and "- [x] text", with any list marker: -, *, +,
// or "1." / "1)") are the tasks. An item's first line is its title; the
// lines indented under it are its text, except nested list items, which
// are its acceptance criteria. Task items nested under a task item are
// criteria too; those under a plain item (a heading-like "- Backend") are
// tasks. Fenced code blocks are
// skipped.
//
// A task's id is its ordinal among the top-level task items (1 for the
// first), unless its text starts with an id in spec-kit's tasks.md form
// ("- [ ] T001 Create project structure": T and at least three digits,
// github/spec-kit templates/tasks-template.md), which is then its id.

// checkItem is a top-level task item as read.
type checkItem struct {
	task Task
	box  int // the offset of the character inside "[ ]"
}

var (
	// listItem is a list item's line: indentation, marker, the spaces
	// after it, and its content.
	listItem = regexp.MustCompile(`^([ \t]*)([-*+]|[0-9]{1,9}[.)])([ \t]+)(.*)$`)
	// taskBox is a task list item's box at the start of its content.
	taskBox = regexp.MustCompile(`^\[([ xX])\](?:[ \t]+|$)`)
	// specKitID is spec-kit's task id at the start of an item's text.
	specKitID = regexp.MustCompile(`^(T[0-9]{3,})(?:[ \t]+|$)`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^[ \t]*(```+|~~~+)")
)

// indentWidth is the width of s's leading spaces and tabs (a tab is 4).
func indentWidth(s string) int {
	w := 0
	for _, c := range s {
		switch c {
		case ' ':
			w++
		case '\t':
			w += 4 - w%4
		default:
			return w
		}
	}
	return w
}

// checklistParser reads a checklist line by line.
type checklistParser struct {
	name    string
	n       int // the line being read, from 1
	items   []checkItem
	cur     *checkItem // the top-level item whose lines follow, or nil
	content int        // the column cur's content starts at
	fence   string     // the open fence's marker, "" outside a code block
}

// parseChecklist reads a checklist's bytes; name is how errors name it.
func parseChecklist(name string, src []byte) ([]checkItem, error) {
	p := &checklistParser{name: name}
	off := 0
	for first := true; first || off < len(src); first = false {
		p.n++
		end := bytes.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src) - off
		}
		line := strings.TrimSuffix(string(src[off:off+end]), "\r")
		p.line(off, line)
		off += end + 1
	}
	p.finish()
	return p.items, p.check()
}

// line reads one line, which starts at byte off.
func (p *checklistParser) line(off int, line string) {
	if m := fence.FindStringSubmatch(line); m != nil {
		switch {
		case p.fence == "":
			if p.cur != nil && indentWidth(line) < p.content {
				p.finish() // a fence left of the item's content ends the item
			}
			p.fence = m[1]
		case strings.HasPrefix(m[1], p.fence[:1]) && len(m[1]) >= len(p.fence):
			p.fence = ""
		}
		return
	}
	if p.fence != "" || strings.TrimSpace(line) == "" {
		return
	}
	indent := indentWidth(line)
	m := listItem.FindStringSubmatchIndex(line)
	if p.cur != nil && indent >= p.content {
		if m != nil {
			crit := taskBox.ReplaceAllString(line[m[8]:m[9]], "")
			p.cur.task.Criteria = append(p.cur.task.Criteria, strings.TrimSpace(crit))
		} else {
			p.cur.task.Text = joinLine(p.cur.task.Text, strings.TrimSpace(line))
		}
		return
	}
	p.finish()
	if m == nil || indent >= 4 {
		return
	}
	content := line[m[8]:m[9]]
	b := taskBox.FindStringSubmatch(content)
	if b == nil {
		return
	}
	it := checkItem{box: off + m[8] + 1}
	it.task = Task{
		ID:    strconv.Itoa(len(p.items) + 1),
		Index: len(p.items),
		Done:  b[1] != " ",
		Pos:   Pos{File: p.name, Line: p.n, Col: utf8.RuneCountInString(line[:m[4]]) + 1},
		Title: strings.TrimSpace(content[len(b[0]):]),
	}
	if id := specKitID.FindStringSubmatch(it.task.Title); id != nil {
		it.task.ID, it.task.Title = id[1], strings.TrimSpace(it.task.Title[len(id[0]):])
	}
	p.items = append(p.items, it)
	p.cur = &p.items[len(p.items)-1]
	spaces := m[7] - m[6]
	if spaces > 4 { // CommonMark: 5+ spaces after the marker make content one space in (the rest is an indented code block)
		spaces = 1
	}
	p.content = indent + (m[5] - m[4]) + spaces
}

// finish ends the current item.
func (p *checklistParser) finish() { p.cur = nil }

// joinLine adds a line to text.
func joinLine(text, line string) string {
	if text == "" {
		return line
	}
	return text + "\n" + line
}

// check refuses an item with no title and two items with one explicit
// id.
func (p *checklistParser) check() error {
	seen := map[string]Pos{}
	for _, it := range p.items {
		if it.task.Title == "" {
			return errorAt(it.task.Pos, "task %s has no text after its box; write what it asks for, or remove the item", it.task.ID)
		}
		if first, dup := seen[it.task.ID]; dup {
			return errorAt(it.task.Pos, "task %s has the same id as the task at %s; give each its own", it.task.ID, first)
		}
		seen[it.task.ID] = it.task.Pos
	}
	return nil
}

// checklistSource is a Markdown checklist of the repository.
type checklistSource struct{ fileSource }

func openChecklist(s Spec, o Options) (Source, error) {
	f, err := openFile(s, o)
	if err != nil {
		return nil, err
	}
	return &checklistSource{f}, nil
}

func (s *checklistSource) Kind() *Kind    { return s.spec.Kind }
func (s *checklistSource) Branch() string { return "" }

// List reads the checklist's top-level task items.
func (s *checklistSource) List(ctx context.Context) ([]Task, error) {
	src, _, name, err := s.read(s.root)
	if err != nil {
		return nil, err
	}
	items, err := parseChecklist(name, src)
	if err != nil {
		return nil, err
	}
	out := make([]Task, len(items))
	for i, it := range items {
		out[i] = it.task
	}
	return out, nil
}

// MarkDone ticks the task's box ("[ ]" becomes "[x]") in the checklist's
// copy under dir, changing that one byte, and writes the file atomically.
func (s *checklistSource) MarkDone(ctx context.Context, dir string, t Task) error {
	src, path, name, err := s.read(dir)
	if err != nil {
		return err
	}
	out, err := markChecklist(name, src, t)
	if err != nil || out == nil {
		return err
	}
	if err := writeAtomic(path, out); err != nil {
		return fmt.Errorf("tick task %s in %s: %w", t.ID, name, err)
	}
	return nil
}

// markChecklist is src with t's box ticked, or nil when it already is.
// The item is found again by its id and title: an ordinal id whose item
// now has another title is looked for by its title among the items.
func markChecklist(name string, src []byte, t Task) ([]byte, error) {
	items, err := parseChecklist(name, src)
	if err != nil {
		return nil, err
	}
	var found *checkItem
	for i := range items {
		if items[i].task.ID == t.ID && items[i].task.Title == t.Title {
			found = &items[i]
			break
		}
	}
	if found == nil {
		var same []*checkItem
		for i := range items {
			if items[i].task.Title == t.Title {
				same = append(same, &items[i])
			}
		}
		if len(same) != 1 {
			return nil, fmt.Errorf("%s has no longer one task %s titled %q (it changed since the batch began): tick it by hand", name, t.ID, t.Title)
		}
		found = same[0]
	}
	if found.task.Done {
		return nil, nil
	}
	out := bytes.Clone(src)
	out[found.box] = 'x'
	return out, nil
}

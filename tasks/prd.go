package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
)

// The prd format is the prd.json that snarktank's ralph writes and reads
// (its prd.json.example and skills/ralph/SKILL.md) and that ralph-tui's
// JSON tracker reads (website/content/docs/plugins/trackers/json.mdx,
// src/plugins/trackers/builtin/json/index.ts). At the top: "userStories"
// (required), "branchName", and "project" (snarktank) or "name"
// (ralph-tui) with a "description". Each story: "id" and "title"
// (strings, required), "description" (string), "acceptanceCriteria"
// (strings), "priority" (a number, 1 the highest), "passes" (a boolean;
// absent reads as false), "notes"; ralph-tui adds "dependsOn" (ids of the
// stories it waits for) and "labels". Other fields are kept as they are:
// marking a story done rewrites only its "passes".

// prdStory is one story as read: its task and the nodes an edit needs.
type prdStory struct {
	task   Task
	node   *jnode
	passes *jnode // nil when the story has no "passes"
}

// prdDoc is a read prd file.
type prdDoc struct {
	branch  string
	stories []prdStory
}

// parsePRD reads a prd file's bytes; name is how errors name the file.
func parsePRD(name string, src []byte) (*prdDoc, error) {
	body, base := src, 0
	if bytes.HasPrefix(body, utf8BOM) {
		body, base = body[len(utf8BOM):], len(utf8BOM)
	}
	root, err := readTree(body)
	var se *syntaxError
	ls := newLines(name, src)
	if errors.As(err, &se) {
		return nil, errorAt(ls.pos(base+se.off), "invalid JSON (%s); fix the file there", se.msg)
	}
	if err != nil {
		return nil, err
	}
	p := prdParser{lines: ls, base: base}
	return p.doc(root)
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

type prdParser struct {
	lines *lines
	base  int // offsets in the tree are after a byte-order mark this long
}

func (p *prdParser) at(off int) Pos { return p.lines.pos(p.base + off) }

func (p *prdParser) doc(root *jnode) (*prdDoc, error) {
	if root.kind != '{' {
		return nil, errorAt(p.at(root.start), "a prd file is one JSON object with \"userStories\", not %s", root.what())
	}
	d := &prdDoc{}
	if m := root.member("branchName"); m != nil && m.val.kind != '0' {
		if m.val.kind != 's' {
			return nil, errorAt(p.at(m.val.start), "\"branchName\" is %s; make it a string naming a git branch, e.g. \"ralph/feature\"", m.val.what())
		}
		if why := checkBranch(m.val.str); why != "" {
			return nil, errorAt(p.at(m.val.start), "\"branchName\" %q is not a valid git branch name (%s); change it", m.val.str, why)
		}
		d.branch = m.val.str
	}
	us := root.member("userStories")
	switch {
	case us == nil:
		hint := ""
		if root.member("tasks") != nil {
			hint = " (this file has \"tasks\": the format calls the list \"userStories\")"
		}
		return nil, errorAt(p.at(root.start), "no \"userStories\"%s; a prd file lists its stories in a \"userStories\" array", hint)
	case us.val.kind != '[':
		return nil, errorAt(p.at(us.val.start), "\"userStories\" is %s; make it an array of story objects", us.val.what())
	}
	seen := map[string]Pos{}
	for i, e := range us.val.elems {
		s, err := p.story(i, e)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[s.task.ID]; dup {
			return nil, errorAt(s.task.Pos, "story %d has the id %q, as the story at %s has; give each story its own id", i+1, s.task.ID, first)
		}
		seen[s.task.ID] = s.task.Pos
		d.stories = append(d.stories, s)
	}
	return d, nil
}

// story reads userStories[i].
func (p *prdParser) story(i int, n *jnode) (prdStory, error) {
	pos := p.at(n.start)
	if n.kind != '{' {
		return prdStory{}, errorAt(pos, "story %d is %s; each story is an object with \"id\" and \"title\"", i+1, n.what())
	}
	keys := map[string]bool{}
	for _, m := range n.members {
		if keys[m.key] {
			return prdStory{}, errorAt(p.at(m.at), "story %d has %q twice; keep one", i+1, m.key)
		}
		keys[m.key] = true
	}
	t := Task{Index: i, Pos: pos}
	label := fmt.Sprintf("story %d", i+1)
	var err error
	if t.ID, err = p.text(n, "id", label, true, "e.g. \"US-001\""); err != nil {
		return prdStory{}, err
	}
	if t.ID != "" {
		label = fmt.Sprintf("story %q", t.ID)
	}
	if t.Title, err = p.text(n, "title", label, true, "a short title"); err != nil {
		return prdStory{}, err
	}
	if t.Text, err = p.text(n, "description", label, false, "what the story asks for"); err != nil {
		return prdStory{}, err
	}
	if t.Criteria, err = p.strings(n, "acceptanceCriteria", label); err != nil {
		return prdStory{}, err
	}
	if t.DependsOn, err = p.strings(n, "dependsOn", label); err != nil {
		return prdStory{}, err
	}
	if err := p.priority(n, label, &t); err != nil {
		return prdStory{}, err
	}
	s := prdStory{node: n}
	if m := n.member("passes"); m != nil {
		if m.val.kind != 'b' {
			return prdStory{}, errorAt(p.at(m.val.start), "%s: \"passes\" is %s; make it true or false", label, m.val.what())
		}
		s.passes, t.Done = m.val, m.val.bool
	}
	s.task = t
	return s, nil
}

// text reads a string member; a required one must be there and not empty.
func (p *prdParser) text(n *jnode, key, label string, required bool, example string) (string, error) {
	m := n.member(key)
	if m == nil || m.val.kind == '0' {
		if required {
			return "", errorAt(p.at(n.start), "%s has no %q; add one (%s)", label, key, example)
		}
		return "", nil
	}
	if m.val.kind != 's' {
		return "", errorAt(p.at(m.val.start), "%s: %q is %s; make it a string (%s)", label, key, m.val.what(), example)
	}
	if required && m.val.str == "" {
		return "", errorAt(p.at(m.val.start), "%s: %q is empty; write one (%s)", label, key, example)
	}
	return m.val.str, nil
}

// strings reads an array-of-strings member.
func (p *prdParser) strings(n *jnode, key, label string) ([]string, error) {
	m := n.member(key)
	if m == nil || m.val.kind == '0' {
		return nil, nil
	}
	if m.val.kind != '[' {
		return nil, errorAt(p.at(m.val.start), "%s: %q is %s; make it an array of strings", label, key, m.val.what())
	}
	out := make([]string, 0, len(m.val.elems))
	for j, e := range m.val.elems {
		if e.kind != 's' {
			return nil, errorAt(p.at(e.start), "%s: %q item %d is %s; make it a string", label, key, j+1, e.what())
		}
		out = append(out, e.str)
	}
	return out, nil
}

// priority reads "priority": a whole number, lower first.
func (p *prdParser) priority(n *jnode, label string, t *Task) error {
	m := n.member("priority")
	if m == nil || m.val.kind == '0' {
		return nil
	}
	if m.val.kind != 'n' {
		return errorAt(p.at(m.val.start), "%s: \"priority\" is %s; make it a whole number (1 runs first)", label, m.val.what())
	}
	v, err := strconv.ParseInt(m.val.num.String(), 10, 0)
	if err != nil {
		return errorAt(p.at(m.val.start), "%s: \"priority\" %s is not a whole number; make it one (1 runs first)", label, m.val.num)
	}
	t.Priority, t.HasPriority = int(v), true
	return nil
}

// prdSource is a prd file of the repository.
type prdSource struct {
	fileSource
	branch string
}

func openPRD(s Spec, o Options) (Source, error) {
	f, err := openFile(s, o)
	if err != nil {
		return nil, err
	}
	return &prdSource{fileSource: f}, nil
}

func (s *prdSource) Kind() *Kind    { return s.spec.Kind }
func (s *prdSource) Branch() string { return s.branch }

// List reads the prd's stories.
func (s *prdSource) List(ctx context.Context) ([]Task, error) {
	src, _, name, err := s.read(s.root)
	if err != nil {
		return nil, err
	}
	d, err := parsePRD(name, src)
	if err != nil {
		return nil, err
	}
	s.branch = d.branch
	out := make([]Task, len(d.stories))
	for i, st := range d.stories {
		out[i] = st.task
	}
	return out, nil
}

// MarkDone sets the story's "passes" to true in the prd's copy under dir,
// changing only those bytes (or adding the member when the story has
// none), and writes the file atomically. A story already passing is left
// as it is.
func (s *prdSource) MarkDone(ctx context.Context, dir string, t Task) error {
	src, path, name, err := s.read(dir)
	if err != nil {
		return err
	}
	out, err := markPRD(name, src, t.ID)
	if err != nil || out == nil {
		return err
	}
	if err := writeAtomic(path, out); err != nil {
		return fmt.Errorf("mark story %q done in %s: %w", t.ID, name, err)
	}
	return nil
}

// markPRD is src with story id's "passes" set to true, or nil when it
// already is.
func markPRD(name string, src []byte, id string) ([]byte, error) {
	d, err := parsePRD(name, src)
	if err != nil {
		return nil, err
	}
	base := 0
	if bytes.HasPrefix(src, utf8BOM) {
		base = len(utf8BOM)
	}
	for _, st := range d.stories {
		if st.task.ID != id {
			continue
		}
		if st.passes != nil {
			if st.passes.bool {
				return nil, nil
			}
			return splice(src, base+st.passes.start, base+st.passes.end, []byte("true")), nil
		}
		at, text := addMember(src[base:], st.node, `"passes": true`)
		return splice(src, base+at, base+at, text), nil
	}
	return nil, fmt.Errorf("%s has no story %q any more; it was there when the batch began: put it back, or mark it by hand", name, id)
}

// splice is src with src[from:to] replaced by text.
func splice(src []byte, from, to int, text []byte) []byte {
	out := make([]byte, 0, len(src)-(to-from)+len(text))
	out = append(out, src[:from]...)
	out = append(out, text...)
	return append(out, src[to:]...)
}

// addMember is where and what to insert to give object obj (in src) one
// more member, laid out as its last member is: on a line of its own with
// that member's indentation, or on the same line.
func addMember(src []byte, obj *jnode, member string) (int, []byte) {
	if len(obj.members) == 0 {
		return obj.start + 1, []byte(member)
	}
	last := obj.members[len(obj.members)-1]
	lineStart := bytes.LastIndexByte(src[:last.at], '\n') + 1
	indent := src[lineStart:last.at]
	if len(bytes.Trim(indent, " \t")) == 0 && lineStart > obj.start {
		return last.val.end, []byte(",\n" + string(indent) + member)
	}
	return last.val.end, []byte(", " + member)
}

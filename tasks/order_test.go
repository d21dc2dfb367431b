package tasks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// task is a test task: id, priority (0 for none), dependencies.
func task(id string, prio int, deps ...string) Task {
	return Task{ID: id, Priority: prio, HasPriority: prio != 0, DependsOn: deps, Pos: Pos{File: "t", Line: 1, Col: 1}}
}

// indexed numbers ts in their order.
func indexed(ts ...Task) []Task {
	for i := range ts {
		ts[i].Index = i
		ts[i].Pos.Line = i + 1
	}
	return ts
}

func TestOrder(t *testing.T) {
	t.Parallel()
	done := func(t Task) Task { t.Done = true; return t }
	held := func(t Task) Task { t.Held = "in progress elsewhere"; return t }
	cases := []struct {
		name string
		ts   []Task
		want []string
	}{
		{"file order without priorities", indexed(task("a", 0), task("b", 0), task("c", 0)), []string{"a", "b", "c"}},
		{"priority first, lower first", indexed(task("a", 3), task("b", 1), task("c", 2)), []string{"b", "c", "a"}},
		{"priority ties keep file order", indexed(task("a", 2), task("b", 1), task("c", 2), task("d", 1)), []string{"b", "d", "a", "c"}},
		{"without a priority after those with one", indexed(task("a", 0), task("b", 5)), []string{"b", "a"}},
		{"dependencies are constraints", indexed(task("a", 1, "b"), task("b", 9)), []string{"b", "a"}},
		{"a freed task competes by priority", indexed(task("a", 2), task("b", 1, "c"), task("c", 3)), []string{"a", "c", "b"}},
		{"done tasks meet dependencies and are left out", indexed(done(task("a", 0)), task("b", 0, "a")), []string{"b"}},
		{"held tasks and their dependents are left out", indexed(held(task("a", 0)), task("b", 0, "a"), task("c", 0, "b"), task("d", 0)), []string{"d"}},
		{"a diamond", indexed(task("top", 0, "l", "r"), task("l", 0, "base"), task("r", 0, "base"), task("base", 0)), []string{"base", "l", "r", "top"}},
		{"a cycle among done tasks is no matter", indexed(done(task("a", 0, "b")), done(task("b", 0, "a")), task("c", 0, "a")), []string{"c"}},
	}
	for _, tc := range cases {
		got, err := Order(tc.ts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ids := taskIDs(got); !cmp.Equal(ids, tc.want) {
			t.Errorf("%s: order %v, want %v", tc.name, ids, tc.want)
		}
	}
}

func TestOrderErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ts   []Task
		want string
	}{
		{"unknown dependency", indexed(task("a", 0), task("b", 0, "zz")), `t:2:1: task "b" depends on "zz", which no task of this source has`},
		{"a cycle", indexed(task("a", 0, "c"), task("b", 0, "a"), task("c", 0, "b"), task("d", 0)), `t:1:1: task "a" is in a dependency cycle (a → c → b → a)`},
		{"depending on itself", indexed(task("a", 0), task("b", 0, "b")), `t:2:1: task "b" is in a dependency cycle (b → b)`},
		{"one id twice", indexed(task("a", 0), task("a", 0)), `t:2:1: task "a" has the id of the task at t:1:1`},
	}
	for _, tc := range cases {
		_, err := Order(tc.ts)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if _, ok := err.(*Error); !ok {
			t.Errorf("%s: error is %T, want *Error", tc.name, err)
		}
	}
}

// Ready is what a batch running several tasks at once takes from as
// tasks merge.
func TestReady(t *testing.T) {
	t.Parallel()
	ts := indexed(task("a", 2), task("b", 1), task("c", 0, "a", "b"), task("d", 1, "b"), task("e", 0, "zz"))
	steps := []struct {
		done []string
		want []string
	}{
		{nil, []string{"b", "a"}},
		{[]string{"b"}, []string{"d", "a"}},
		{[]string{"b", "a"}, []string{"d", "c"}},
		{[]string{"a", "b", "c", "d"}, nil},
	}
	for _, s := range steps {
		done := map[string]bool{}
		for _, id := range s.done {
			done[id] = true
		}
		if got := taskIDs(Ready(ts, done)); !cmp.Equal(got, s.want) {
			t.Errorf("done %v: ready %v, want %v", s.done, got, s.want)
		}
	}
	held := indexed(task("a", 0), task("b", 0))
	held[0].Held, held[1].Done = "deferred", true
	if got := Ready(held, nil); len(got) != 0 {
		t.Errorf("held or done tasks are ready: %v", taskIDs(got))
	}
}

// Order and Ready agree: taking Ready's first each time gives Order.
func TestReadyAgreesWithOrder(t *testing.T) {
	t.Parallel()
	var ts []Task
	for i := range 60 {
		var deps []string
		for j := i % 7; j < i; j += 5 + i%3 {
			deps = append(deps, fmt.Sprint(j))
		}
		tk := task(fmt.Sprint(i), (i*7)%4, deps...)
		tk.Done = i%11 == 0
		ts = append(ts, tk)
	}
	ts = indexed(ts...)
	order, err := Order(ts)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	var walked []string
	for {
		r := Ready(ts, done)
		if len(r) == 0 {
			break
		}
		walked = append(walked, r[0].ID)
		done[r[0].ID] = true
	}
	if !cmp.Equal(walked, taskIDs(order)) {
		t.Errorf("Ready's walk %v\nOrder %v", walked, taskIDs(order))
	}
}

func BenchmarkOrder(b *testing.B) {
	var ts []Task
	for i := range 5000 {
		var deps []string
		if i > 0 {
			deps = append(deps, fmt.Sprint(i/2))
		}
		ts = append(ts, task(fmt.Sprint(i), i%5, deps...))
	}
	ts = indexed(ts...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Order(ts); err != nil {
			b.Fatal(err)
		}
	}
}

func taskIDs(ts []Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

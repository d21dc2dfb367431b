package tasks

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
)

// Order is the order a batch running one task at a time takes them in:
// every task after the tasks it depends on; among the tasks that are
// ready, the lower priority first (a task without one after those with
// one), then the source's order (Index). Done tasks meet the dependencies
// on them and are not in the result; nor are held tasks (Held) and the
// tasks that wait on one, which cannot run.
//
// Its error is an *Error at a task's Pos: two tasks with one id, a
// dependency on an id no task has, or tasks that depend on each other in
// a cycle.
func Order(ts []Task) ([]Task, error) {
	byID, err := checkGraph(ts)
	if err != nil {
		return nil, err
	}
	waits := make([]int, len(ts))        // not-done dependencies each task waits for
	dependents := make([][]int, len(ts)) // the tasks waiting for each
	h := &readyHeap{ts: ts}
	for i, t := range ts {
		if t.Done {
			continue
		}
		for _, d := range t.DependsOn {
			if j := byID[d]; !ts[j].Done {
				waits[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
		if waits[i] == 0 && t.Held == "" {
			h.idx = append(h.idx, i)
		}
	}
	heap.Init(h)
	out := make([]Task, 0, len(ts))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		out = append(out, ts[i])
		for _, j := range dependents[i] {
			if waits[j]--; waits[j] == 0 && ts[j].Held == "" {
				heap.Push(h, j)
			}
		}
	}
	return out, nil
}

// Ready are the tasks that can start now, best first (as Order ranks
// them): not done (by Done or by done[id]), not held, and every task they
// depend on done. A batch running up to N tasks at once calls it whenever
// one ends, with done holding the tasks merged so far, and starts the
// first of them it is not already running. A dependency on an unknown id
// is never met (Order says so).
func Ready(ts []Task, done map[string]bool) []Task {
	state := make(map[string]bool, len(ts)) // id → done
	for _, t := range ts {
		state[t.ID] = t.Done || done[t.ID]
	}
	var out []Task
	for _, t := range ts {
		if state[t.ID] || t.Held != "" {
			continue
		}
		ready := true
		for _, d := range t.DependsOn {
			if !state[d] {
				ready = false
				break
			}
		}
		if ready {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b Task) int { return compareTasks(&a, &b) })
	return out
}

// compareTasks ranks ready tasks: with a priority before without, lower
// priority first, then source order, then id.
func compareTasks(a, b *Task) int {
	if a.HasPriority != b.HasPriority {
		if a.HasPriority {
			return -1
		}
		return 1
	}
	if a.HasPriority {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.Index, b.Index); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// readyHeap holds indexes of ts, best first.
type readyHeap struct {
	ts  []Task
	idx []int
}

func (h *readyHeap) Len() int           { return len(h.idx) }
func (h *readyHeap) Less(i, j int) bool { return compareTasks(&h.ts[h.idx[i]], &h.ts[h.idx[j]]) < 0 }
func (h *readyHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *readyHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *readyHeap) Pop() any {
	n := len(h.idx) - 1
	x := h.idx[n]
	h.idx = h.idx[:n]
	return x
}

// checkGraph indexes ts by id and refuses a duplicate id, a dependency on
// an unknown id, and a cycle among tasks not done.
func checkGraph(ts []Task) (map[string]int, error) {
	byID := make(map[string]int, len(ts))
	for i, t := range ts {
		if j, dup := byID[t.ID]; dup {
			return nil, errorAt(t.Pos, "task %q has the id of the task at %s; each task needs its own id", t.ID, ts[j].Pos)
		}
		byID[t.ID] = i
	}
	for _, t := range ts {
		for _, d := range t.DependsOn {
			if _, ok := byID[d]; !ok {
				return nil, errorAt(t.Pos, "task %q depends on %q, which no task of this source has; remove the dependency or add the task", t.ID, d)
			}
		}
	}
	c := cycleFinder{ts: ts, byID: byID, color: make([]byte, len(ts))}
	for i := range ts {
		if cyc := c.from(i); cyc != nil {
			t := ts[cyc[0]]
			names := make([]string, len(cyc))
			for k, j := range cyc {
				names[k] = ts[j].ID
			}
			return nil, errorAt(t.Pos, "task %q is in a dependency cycle (%s): none of them can start; remove one of those dependencies", t.ID, strings.Join(names, " → "))
		}
	}
	return byID, nil
}

// cycleFinder walks dependencies depth first among tasks not done.
type cycleFinder struct {
	ts    []Task
	byID  map[string]int
	color []byte // 0 unseen, 1 on the current path, 2 finished
	path  []int
}

// from walks from task i and returns a cycle it finds (its tasks in
// dependency order, the first repeated at the end), or nil.
func (c *cycleFinder) from(i int) []int {
	if c.ts[i].Done || c.color[i] == 2 {
		return nil
	}
	if c.color[i] == 1 {
		k := slices.Index(c.path, i)
		return append(slices.Clone(c.path[k:]), i)
	}
	c.color[i] = 1
	c.path = append(c.path, i)
	for _, d := range c.ts[i].DependsOn {
		if cyc := c.from(c.byID[d]); cyc != nil {
			return cyc
		}
	}
	c.path = c.path[:len(c.path)-1]
	c.color[i] = 2
	return nil
}

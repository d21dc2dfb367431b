package config

import (
	"fmt"
	"maps"
	"slices"
)

// A run's first chain record, RunStarted, carries the goal as its
// function_name and the config's snapshot in its metadata. The ledger
// refuses a function_name over 1024 bytes and a record that does not fit
// one transaction (about 4.8 MB with the default store); these bounds
// refuse such a config where it is written, with its line, before any
// store is created, and keep a wide margin below the ledger's limits.
const (
	// MaxGoalBytes is the ledger's bound on a function_name.
	MaxGoalBytes = 1024
	// MaxSnapshotBytes bounds the config's snapshot recorded in RunStarted.
	MaxSnapshotBytes = 1 << 20
	// MaxNesting bounds how deeply tables and arrays nest in intent.params.
	MaxNesting = 32
)

// validateRecord refuses a config whose RunStarted the ledger would refuse.
func (c *Config) validateRecord(file string) error {
	if n := len(c.Intent.Goal); n > MaxGoalBytes {
		return c.errAt(file, "intent.goal", "intent.goal is %d bytes; at most %d are allowed, since the chain records it as the run's name: put the details in intent.prompt_file or intent.params", n, MaxGoalBytes)
	}
	for _, k := range sortedKeys(c.Intent.Params) {
		if tooDeep(c.Intent.Params[k], 1) {
			key := "intent.params." + k
			return c.errAt(file, key, "%s nests tables or arrays more than %d deep; flatten it", key, MaxNesting)
		}
	}
	if n := len(c.Snapshot()); n > MaxSnapshotBytes {
		key, line, size := c.largestKey()
		if line == 0 && c.lines != nil {
			line = c.lines.findPath(key)
		}
		return &Error{File: file, Line: line, Msg: fmt.Sprintf("the config is %d bytes once recorded on the chain, over the %d allowed; %s alone is %d bytes: shorten it or move it to a file the plan reads", n, MaxSnapshotBytes, key, size)}
	}
	return nil
}

// tooDeep reports whether v nests tables or arrays deeper than MaxNesting,
// counting v itself at depth.
func tooDeep(v any, depth int) bool {
	switch t := v.(type) {
	case map[string]any:
		if depth > MaxNesting {
			return true
		}
		for _, e := range t {
			if tooDeep(e, depth+1) {
				return true
			}
		}
	case []map[string]any:
		if depth > MaxNesting {
			return true
		}
		for _, e := range t {
			if tooDeep(e, depth+1) {
				return true
			}
		}
	case []any:
		if depth > MaxNesting {
			return true
		}
		for _, e := range t {
			if tooDeep(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// largestKey names the key that takes most of the snapshot, the line that
// sets it when known (0: look it up), and its size: the largest of the
// config's free-text fields and intent.params entries.
func (c *Config) largestKey() (key string, line, size int) {
	key = "intent.params"
	consider := func(k string, l, n int) {
		if n > size {
			key, line, size = k, l, n
		}
	}
	consider("intent.goal", 0, len(c.Intent.Goal))
	consider("plan.rtfs", 0, len(c.Plan.RTFS))
	for i, s := range c.Stop {
		consider(fmt.Sprintf("stop %q rtfs", s.Name), c.Stop[i].Line, len(s.RTFS))
		consider(fmt.Sprintf("stop %q json", s.Name), c.Stop[i].Line, len(s.JSON))
	}
	for _, k := range sortedKeys(c.Intent.Params) {
		consider("intent.params."+k, 0, approxSize(c.Intent.Params[k]))
	}
	return key, line, size
}

// approxSize estimates what v takes in the snapshot.
func approxSize(v any) int {
	switch t := v.(type) {
	case string:
		return len(t)
	case map[string]any:
		n := 2
		for k, e := range t {
			n += len(k) + 3 + approxSize(e)
		}
		return n
	case []map[string]any:
		n := 2
		for _, e := range t {
			n += approxSize(e) + 2
		}
		return n
	case []any:
		n := 2
		for _, e := range t {
			n += approxSize(e) + 2
		}
		return n
	}
	return len(fmt.Sprint(v))
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

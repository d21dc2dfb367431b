package config

import (
	"encoding"
	"reflect"
	"strings"
)

// knownKeys lists every dotted key a config may set, read from the toml
// tags of t (Config): "loop.workdir", "stop.max", and each table itself
// ("loop").
func knownKeys(t reflect.Type) []string {
	var out []string
	onPath := map[reflect.Type]bool{} // a type that holds itself is walked once
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || onPath[t] || reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			return
		}
		onPath[t] = true
		defer delete(onPath, t)
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			key := prefix + name
			out = append(out, key)
			walk(f.Type, key+".")
		}
	}
	walk(t, "")
	return out
}

// nearestKey is the known key an unknown one most likely meant: the one
// whose last part is closest to its last part (within a third of its
// length, at least 1 and at most 3 edits), preferring the same table, "" when none
// is close.
func nearestKey(known []string, unknown string) string {
	parent, last := splitKey(unknown)
	limit := min(max(len(last)/3, 1), 3)
	best, bestScore := "", 0
	for _, k := range known {
		kp, kl := splitKey(k)
		d := editDistance(last, kl)
		if d > limit || k == unknown {
			continue
		}
		score := d * 2
		if kp != parent {
			score++ // another table: only when nothing in this one is as close
		}
		if best == "" || score < bestScore {
			best, bestScore = k, score
		}
	}
	return best
}

func splitKey(k string) (parent, last string) {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return "", k
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours (stpo for
// stop) cost one each. Bytes: keys are ASCII.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

package config

import (
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// lineIndex maps dotted key paths to the line that first defines them, so
// errors about keys (which the TOML decoder reports without positions) can
// still name their line.
type lineIndex struct {
	keys      map[string]int
	cols      map[string]int // the column a key's value starts at
	stopLines []int
	arrays    map[string][]int // the line of each [[table]], by table name
}

var (
	tableRe  = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$`)
	arrayRe  = regexp.MustCompile(`^\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$`)
	keyRe    = regexp.MustCompile(`^\s*([A-Za-z0-9_\-."' ]+?)\s*=`)
	inlineRe = regexp.MustCompile(`([A-Za-z0-9_\-]+)\s*=`)
)

func cleanKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

func indexLines(data []byte) *lineIndex {
	ix := &lineIndex{keys: map[string]int{}, cols: map[string]int{}, arrays: map[string][]int{}}
	table := ""
	inMulti := ""
	for n, line := range strings.Split(string(data), "\n") {
		lineNo := n + 1
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		if m := arrayRe.FindStringSubmatch(line); m != nil {
			table = cleanKey(m[1])
			if table == "stop" {
				ix.stopLines = append(ix.stopLines, lineNo)
			}
			ix.arrays[table] = append(ix.arrays[table], lineNo)
			ix.add(table, lineNo)
			continue
		}
		if m := tableRe.FindStringSubmatch(line); m != nil {
			table = cleanKey(m[1])
			ix.add(table, lineNo)
			continue
		}
		if m := keyRe.FindStringSubmatch(line); m != nil {
			key := join(table, cleanKey(m[1]))
			ix.add(key, lineNo)
			rest := line[len(m[0]):]
			if _, ok := ix.cols[key]; !ok {
				ix.cols[key] = len(m[0]) + len(rest) - len(strings.TrimLeft(rest, " \t")) + 1
			}
			if i := strings.Index(rest, "{"); i >= 0 {
				for _, im := range inlineRe.FindAllStringSubmatch(rest[i:], -1) {
					ix.add(join(key, im[1]), lineNo)
				}
			}
			for _, d := range []string{`'''`, `"""`} {
				if strings.Count(rest, d)%2 == 1 {
					inMulti = d
				}
			}
		}
	}
	return ix
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func (ix *lineIndex) add(key string, line int) {
	if _, ok := ix.keys[key]; !ok {
		ix.keys[key] = line
	}
}

// find returns the line of a decoder key, or 0.
func (ix *lineIndex) find(k toml.Key) int { return ix.findPath(k.String()) }

// findPath returns the line defining path or, failing that, its nearest
// enclosing table.
func (ix *lineIndex) findPath(path string) int {
	for p := path; p != ""; {
		if l, ok := ix.keys[p]; ok {
			return l
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (ix *lineIndex) stopLine(i int) int {
	if ix == nil || i >= len(ix.stopLines) {
		return 0
	}
	return ix.stopLines[i]
}

// arrayLine is the line of the i-th [[table]] named name, or 0.
func (ix *lineIndex) arrayLine(name string, i int) int {
	if ix == nil || i >= len(ix.arrays[name]) {
		return 0
	}
	return ix.arrays[name][i]
}

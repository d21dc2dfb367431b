package stop

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
)

// TestDocsExamples checks that every TOML, JSON and RTFS example in
// docs/stop.md is accepted as written.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../docs/stop.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(toml|json|clojure)\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	seen := map[string]int{}
	for _, b := range blocks {
		lang, src := b[1], b[2]
		seen[lang]++
		switch lang {
		case "toml":
			cfg, err := config.Parse([]byte("[plan]\nrtfs = \"(do 1)\"\n\n"+src), "stop.md", func(string) string { return "" })
			if err != nil {
				t.Errorf("config: %v\n%s", err, src)
				continue
			}
			if _, err := FromConfig(cfg.Stop, "stop.md"); err != nil {
				t.Errorf("FromConfig: %v\n%s", err, src)
			}
		case "json":
			if _, err := ParsePredicateJSON([]byte(src), "stop.md"); err != nil {
				t.Errorf("%v\n%s", err, src)
			}
		case "clojure":
			for _, form := range strings.Split(src, "\n\n") {
				if _, err := ParsePredicateRTFS(form, "stop.md"); err != nil {
					t.Errorf("%v\n%s", err, form)
				}
			}
		}
	}
	if seen["toml"] < 3 || seen["json"] < 1 || seen["clojure"] < 1 {
		t.Errorf("examples found: %v", seen)
	}
}

package agent

import (
	"slices"
	"testing"
)

// The CLIs are the table's, each with a backend that knows its own name
// and binary; "command" is not one of them but Resolve knows it.
func TestCLIsAreTheBackends(t *testing.T) {
	clis := CLIs()
	if !slices.Equal(clis, []string{"claude", "codex", "gemini", "opencode"}) {
		t.Errorf("CLIs() = %v", clis)
	}
	for _, c := range clis {
		b := backendFor(c)
		if b.Name != c || b.bin == "" || !IsCLI(c) {
			t.Errorf("backend of %s: name %q, bin %q", c, b.Name, b.bin)
		}
	}
	if IsCLI("command") || backendFor("command").Name == "" || IsCLI("auto") {
		t.Error(`"command" is a backend but not an agent CLI; "auto" is neither`)
	}
	if k := Known(); k[0] != "auto" || k[len(k)-1] != "command" || !slices.Equal(k[1:len(k)-1], clis) {
		t.Errorf("Known() = %v", k)
	}
}

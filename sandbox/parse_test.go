package sandbox

import "testing"

func TestParseNetwork(t *testing.T) {
	for in, want := range map[string]Network{"": NetModel, "model": NetModel, "none": NetNone, "all": NetAll} {
		if got, err := ParseNetwork(in); err != nil || got != want {
			t.Errorf("ParseNetwork(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"bogus", "Model", " all"} {
		if _, err := ParseNetwork(in); err == nil {
			t.Errorf("ParseNetwork(%q) is no error", in)
		}
	}
}

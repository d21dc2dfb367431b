package config

import (
	"strings"
	"testing"
)

func TestRecordBounds(t *testing.T) {
	t.Parallel()
	const tail = "[plan]\nrtfs = '(do 1)'\n"
	nest := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	cases := []struct {
		name, toml, wantErr string
	}{
		{"goal at the bound", "[intent]\ngoal = \"" + strings.Repeat("é", MaxGoalBytes/2) + "\"\n" + tail, ""},
		{"goal over the bound", "[intent]\ngoal = \"" + strings.Repeat("x", MaxGoalBytes+1) + "\"\n" + tail,
			"ralph.toml:2: intent.goal is 1025 bytes; at most 1024 are allowed"},
		{"arrays at the bound", "[intent]\nparams = { a = " + nest(MaxNesting) + " }\n" + tail, ""},
		{"arrays over the bound", "[intent]\nparams = { a = " + nest(MaxNesting+1) + " }\n" + tail,
			"ralph.toml:2: intent.params.a nests tables or arrays more than 32 deep"},
		{"plan over the snapshot bound", "[plan]\nrtfs = '" + strings.Repeat(" ", MaxSnapshotBytes) + "1'\n",
			"ralph.toml:2: the config is"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.toml), "ralph.toml", func(string) string { return "" })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("Parse: %v; want an error starting %q", err, tc.wantErr)
			}
		})
	}
}

package stop

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
)

// A [[stop]] table that its kind's row refuses is an error naming the
// config's file:line, the table, and what to fix (checked by FromConfig,
// where the rows are; config only decodes).
func TestTableErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"unknown stop kind", "[plan]\nrtfs = \"1\"\n\n[[stop]]\nname = \"x\"\nkind = \"max_iters\"\n", `ralph.toml:4: [[stop]] "x": kind "max_iters" is unknown`},
		{"stop missing field", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"never\"\n[[stop]]\nkind = \"command\"\n", `ralph.toml:5: [[stop]] (kind "command"): kind "command" needs a positive cmd`},
		{"bad regex", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"command\"\ncmd = [\"go\"]\nmust_match = \"(\"\n", "must_match is not a valid regex"},
		{"bad class", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"never\"\nclass = \"great\"\n", `class "great" must be success, failure or limit`},
		{"bad error_class", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"never\"\nerror_class = \"maybe\"\n", `ralph.toml:3: [[stop]] (kind "never"): error_class "maybe" must be not_met, success, failure or limit`},
		{"duplicate names", "[plan]\nrtfs = \"1\"\n[[stop]]\nname = \"a\"\nkind = \"never\"\n[[stop]]\nname = \"a\"\nkind = \"never\"\n", `ralph.toml:6: stop condition name "a" is used twice (first at line 3)`},
		{"predicate needs one", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"predicate\"\n", `needs exactly one of rtfs or json`},
		{"nested stop", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"all\"\nconditions = [{kind = \"file_exists\"}]\n", `kind "file_exists" needs a positive path`},
		{"exit out of range", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"command\"\ncmd = [\"go\"]\nexpect_exit = -1\n", `expect_exit -1 is not an exit status; use 0 to 255`},
		{"field of another kind", "[plan]\nrtfs = \"1\"\n[[stop]]\nname = \"tests\"\nkind = \"command\"\ncmd = [\"go\"]\nmax = 3\n", `ralph.toml:3: [[stop]] "tests": max does not apply to kind "command" and would be ignored; remove it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse([]byte(tc.src), "ralph.toml", func(string) string { return "" })
			if err == nil {
				_, err = FromConfig(c.Stop, "ralph.toml")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

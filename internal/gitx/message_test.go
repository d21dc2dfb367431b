package gitx

import (
	"errors"
	"testing"
)

func TestGitMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ stderr, want string }{
		{"fatal: repository '/x' does not exist\n", "repository '/x' does not exist"},
		{"ssh: Could not resolve hostname h: Name or service not known\r\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n",
			"ssh: Could not resolve hostname h: Name or service not known"},
		{"warning: w\nerror: pathspec 'x' did not match\nhint: h\n", "pathspec 'x' did not match"},
		{"just a line\n", "just a line"},
		{"", "exit status 128"},
	} {
		err := &Error{Args: []string{"x"}, Stderr: tc.stderr, Err: errors.New("exit status 128")}
		if got := Message(err); got != tc.want {
			t.Errorf("Message(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}

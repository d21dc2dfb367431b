package fleet

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplitWorkspace(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	if err := os.Mkdir(filepath.Join(local, "repo.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in, url, ref, err string
	}{
		{in: "https://git.example.com/team/p.git", url: "https://git.example.com/team/p.git"},
		{in: "https://git.example.com/team/p.git@main", url: "https://git.example.com/team/p.git", ref: "main"},
		{in: "https://git.example.com/team/p.git@feature/x", url: "https://git.example.com/team/p.git", ref: "feature/x"},
		{in: "git@github.com:team/p.git", url: "git@github.com:team/p.git"},
		{in: "git@github.com:team/p.git@v1.2", url: "git@github.com:team/p.git", ref: "v1.2"},
		{in: "ssh://git@host/team/p.git", url: "ssh://git@host/team/p.git"},
		{in: "ssh://git@host/team/p.git@0a1b2c3", url: "ssh://git@host/team/p.git", ref: "0a1b2c3"},
		{in: filepath.Join(local, "repo.git") + "@main", url: filepath.Join(local, "repo.git"), ref: "main"},
		{in: "https://git.example.com/p.git@", err: "names no ref after @"},
		{in: "https://git.example.com/p.git@-x", err: "starts with '-'"},
		{in: "--upload-pack=evil", err: "starts with '-'"},
		{in: "https://me:t0ken@git.example.com/p.git", err: "carries a credential"},
		{in: "https://t0ken@git.example.com/p.git@main", err: "carries a credential"},
	}
	for _, tc := range tests {
		u, ref, err := SplitWorkspace(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitWorkspace(%q) = %q, %q, %v; want an error with %q", tc.in, u, ref, err, tc.err)
			} else if strings.Contains(err.Error(), "t0ken") {
				t.Errorf("SplitWorkspace(%q): the error repeats the credential: %v", tc.in, err)
			}
		case err != nil || u != tc.url || ref != tc.ref:
			t.Errorf("SplitWorkspace(%q) = %q, %q, %v; want %q, %q", tc.in, u, ref, err, tc.url, tc.ref)
		}
	}
}

// FuzzSplitWorkspace: any --workspace value is either refused with an
// error or split into a URL and a ref that git cannot read as options and
// that carry no password.
func FuzzSplitWorkspace(f *testing.F) {
	for _, s := range []string{"https://h/p.git@main", "git@h:p.git@v1", "ssh://git@h/p@0a1b2c3", "/srv/p.git", "@", "-x@y", "https://u:p@h/r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ref, err := SplitWorkspace(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(u, "-") || strings.HasPrefix(ref, "-") {
			t.Fatalf("SplitWorkspace(%q) = %q, %q: an option for git", s, u, ref)
		}
		if pu, perr := url.Parse(u); perr == nil && pu.User != nil {
			if _, has := pu.User.Password(); has {
				t.Fatalf("SplitWorkspace(%q) = %q: a password kept", s, u)
			}
		}
	})
}

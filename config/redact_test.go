package config

import (
	"slices"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://api.example.com/v1", "https://api.example.com/v1"},
		{"https://me:hunter2hunter2@api.example.com/v1", "https://REDACTED@api.example.com/v1"},
		{"https://x.openai.azure.com/v1?api-key=sk-abcdef123456&api-version=2024-06-01",
			"https://x.openai.azure.com/v1?api-key=REDACTED&api-version=2024-06-01"},
		{"https://h/v1?token=t0k3nt0k3n&key=k&secret=s&password=p&sig=abc&X-Amz-Signature=f&accessToken=a&page=2",
			"https://h/v1?token=REDACTED&key=REDACTED&secret=REDACTED&password=REDACTED&sig=REDACTED&X-Amz-Signature=REDACTED&accessToken=REDACTED&page=2"},
		{"https://h/v1?client_secret=x&design=1", "https://h/v1?client_secret=REDACTED&design=1"},
		{"not a url %zz", "not a url %zz"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLSecrets(t *testing.T) {
	t.Parallel()
	got := URLSecrets("https://me:pa%2Fss@h/v1?api-key=sk-secret-1&page=2")
	for _, want := range []string{"pa/ss", "sk-secret-1"} {
		if !slices.Contains(got, want) {
			t.Errorf("URLSecrets lacks %q: %q", want, got)
		}
	}
	if slices.Contains(got, "2") {
		t.Errorf("URLSecrets holds a value that is no secret: %q", got)
	}
}

// The run record's config snapshot holds no secret of base_url.
func TestSnapshotRedactsBaseURL(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("[model]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"https://u:pw-123456789@h/v1?api-key=sk-live-123456789\"\n"), "ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	snap := c.Snapshot()
	for _, secret := range []string{"pw-123456789", "sk-live-123456789"} {
		if strings.Contains(snap, secret) {
			t.Errorf("the snapshot holds %q:\n%s", secret, snap)
		}
	}
}

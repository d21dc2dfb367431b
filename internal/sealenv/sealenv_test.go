package sealenv

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestSplitSecrets(t *testing.T) {
	t.Parallel()
	env := []string{"OPENAI_API_KEY=sk-1", "PATH=/bin", "GH_TOKEN=t", "db_password=p", sealedFDEnv + "=3", "TOKEN=x", "KEYS=k", "HOME=/h"}
	secret, rest := splitSecrets(env)
	if want := []string{"OPENAI_API_KEY=sk-1", "GH_TOKEN=t", "db_password=p", "TOKEN=x"}; !slices.Equal(secret, want) {
		t.Errorf("secret = %q, want %q", secret, want)
	}
	if want := []string{"PATH=/bin", "KEYS=k", "HOME=/h"}; !slices.Equal(rest, want) {
		t.Errorf("rest = %q, want %q", rest, want)
	}
}

func TestSealPipeHoldsTheSecrets(t *testing.T) {
	t.Parallel()
	r, ok, err := sealPipe([]string{"A_KEY=1", "B_TOKEN=2"})
	if err != nil || !ok {
		t.Fatalf("sealPipe: ok %v, %v", ok, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(string(b), "\x00"); !slices.Equal(got, []string{"A_KEY=1", "B_TOKEN=2"}) {
		t.Errorf("the pipe holds %q", got)
	}
	if _, ok, _ := sealPipe(nil); ok {
		t.Error("sealPipe(nil) opened a pipe for nothing")
	}
	if _, ok, _ := sealPipe([]string{"BIG_KEY=" + strings.Repeat("x", maxSealed)}); ok {
		t.Error("sealPipe opened a pipe for more than it can hold")
	}
}

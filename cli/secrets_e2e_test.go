package cli_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// peekScript, run by shell.exec, reads every environ under /proc it can
// (its parent ralph's, its ancestors', the procgroup watcher's) and
// writes it raw and in base64 to peek.txt, where no redaction reaches.
const peekScript = `p=$PPID; while [ "$p" -gt 1 ]; do cat /proc/$p/environ; p=$(awk '{print $4}' /proc/$p/stat); done > peek.txt 2>/dev/null
for f in /proc/[0-9]*/environ; do cat "$f"; done >> peek.txt 2>/dev/null
base64 -w0 peek.txt > peek.b64; cat peek.b64; echo; cat /proc/$PPID/environ | base64 -w0`

// No child of ralph can read the model's key, through its parent's or its
// ancestors' environ or any other process's, root or not; the key and the
// secret query key of base_url reach neither the chain nor the output.
var _ = suite.Add(e2e.Test{Name: "ChildCannotReadTheKey", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	const key, queryKey = "sk-e2e-model-key-5f3a9c1d", "sk-query-key-77e1b2c4"
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[model]
provider = "static"
base_url = "https://llm.example/v1?api-key=`+queryKey+`&api-version=1"
[plan]
rtfs = '''(step "Peek" (call :shell.exec {:cmd "sh" :args ["-c" "`+strings.ReplaceAll(peekScript, `"`, `\"`)+`"]}))'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sh"]
`)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"), "OPENAI_API_KEY=" + key}
	out, errOut, code := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui", "--store", filepath.Join(dir, "store")).Env(env).Run()
	if code != 3 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	peek, err := os.ReadFile(filepath.Join(dir, "peek.txt"))
	if err != nil || len(peek) == 0 {
		t.Fatalf("the child read nothing: %v", err)
	}
	chain, _, _ := e.Ralph("chain", "export", "--store", filepath.Join(dir, "store")).Env(env).Run()
	if !strings.Contains(chain, "shell.exec") || !strings.Contains(chain, "api-key=REDACTED") {
		t.Fatalf("the chain lacks the call or the redacted base_url:\n%s", chain)
	}
	for _, secret := range []string{key, queryKey} {
		b64 := base64.StdEncoding.EncodeToString([]byte(secret))
		for what, text := range map[string]string{"a process's environ": string(peek), "the chain": chain, "ralph's output": out + errOut} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", what, secret)
			}
			if dec := decodeAll(text); strings.Contains(dec, secret) {
				t.Errorf("%s holds %q in base64 (%s…)", what, secret, b64[:8])
			}
		}
	}
}})

// decodeAll decodes every base64 run of text (at any of the three
// alignments a secret may start at) and joins the results.
func decodeAll(text string) string {
	var b strings.Builder
	for _, field := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=')
	}) {
		for skip := 0; skip < 4 && skip < len(field); skip++ {
			f := strings.TrimRight(field[skip:], "=")
			f = f[:len(f)/4*4]
			if d, err := base64.StdEncoding.DecodeString(f); err == nil {
				b.Write(d)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

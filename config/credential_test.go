package config

import (
	"strings"
	"testing"
)

func TestSubmitRefusesACredentialInTheConfig(t *testing.T) {
	t.Parallel()
	const head = "[intent]\ngoal = \"g\"\n[plan]\nrtfs = '(call :fs.read {:path \"a\"})'\n"
	for _, tc := range []struct{ name, src, want string }{
		{"base_url query key", head + "[model]\nprovider = \"static\"\nbase_url = \"https://llm.example/v1?api-key=s3cret&x=1\"\n",
			"ralph.toml:7: model.base_url carries a credential in https://llm.example/v1?api-key=xxxxx&x=1"},
		{"base_url password", head + "[model]\nprovider = \"static\"\nbase_url = \"https://bob:hunter2@llm.example/v1\"\n",
			"ralph.toml:7: model.base_url carries a credential in https://xxxxx@llm.example/v1"},
		{"token in a stop command", head + "[[stop]]\nname = \"up\"\nkind = \"command\"\ncmd = [\"curl\", \"https://ci.example/status?access_token=abc\"]\n",
			"stop.0.cmd.1 carries a credential in https://ci.example/status?access_token=xxxxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tc.src), "ralph.toml", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.RefuseCredential(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "=abc") {
				t.Errorf("the refusal repeats the secret: %v", err)
			}
		})
	}
	for _, src := range []string{
		head + "[model]\nprovider = \"static\"\nbase_url = \"https://llm.example/v1?model=x\"\n",
		head + "[[stop]]\nname = \"up\"\nkind = \"command\"\ncmd = [\"git\", \"ls-remote\", \"ssh://git@host/r\"]\n",
	} {
		if key, masked, ok := credentialIn(src); ok {
			t.Errorf("%q: refused %s %s, which carries no credential", src, key, masked)
		}
	}
}

// FuzzCredentialIn: any config text is either found clean or refused
// with the secret masked; nothing panics.
func FuzzCredentialIn(f *testing.F) {
	f.Add("[model]\nbase_url = \"https://u:p@h/v1?api-key=k\"\n")
	f.Add("[[stop]]\ncmd = [\"curl\", \"https://h/?token=t&x=1\"]\n")
	f.Add("a = \"http://%zz?key=\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		key, masked, ok := credentialIn(text)
		if ok && (key == "" || !strings.Contains(masked, "xxxxx")) {
			t.Fatalf("refused %q at %q without masking it", masked, key)
		}
	})
}

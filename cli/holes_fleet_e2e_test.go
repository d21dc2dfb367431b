package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/e2e"
)

// A worker's --policy governs every process a job can start and every
// endpoint and secret it names (issue 37 item 2): under shell_allow = ["go"]
// a job's [[hook]] and [[notify]] command running sh are refused before
// anything of the job runs, and so is a job that would send a worker
// variable (api_key_env) to a base_url on a host the policy does not list;
// the worker's endpoint never hears from it.
var _ = suite.Add(e2e.Test{Name: "WorkerPolicyHoldsHooksEndpointsAndSecrets", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	var heard atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { heard.Add(1) }))
	defer srv.Close()
	policy := filepath.Join(t.TempDir(), "worker.toml")
	writeFile(t, policy, "[governance]\nshell_allow = [\"go\"]\nhosts = [\"api.example.com\"]\nenv_allow = [\"EXAMPLE_API_KEY\"]\n")
	f.workerArgs("held", 1, []string{"--policy", policy}, "RALPH_E2E_SECRET=topsecret")
	dir := t.TempDir()
	const echo = `[intent]
goal = "g"
[model]
provider = "static"
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
kind = "max_iterations"
max = 1
`
	hookOut, notifyOut := filepath.Join(dir, "hook"), filepath.Join(dir, "notify")
	cases := []struct{ cfg, want string }{
		{echo + fmt.Sprintf("[[hook]]\nat = \"before_iteration\"\ncmd = [\"sh\", \"-c\", \"id > %s\"]\n", hookOut),
			`its [[hook]] before_iteration-1 runs "sh", which the policy's shell_allow ["go"] does not name`},
		{echo + fmt.Sprintf("[[notify]]\nkind = \"command\"\ncmd = [\"sh\", \"-c\", \"id > %s\"]\n", notifyOut),
			`its [[notify]] command-1 runs "sh", which the policy's shell_allow ["go"] does not name`},
		{strings.Replace(echo, `provider = "static"`, fmt.Sprintf("provider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"RALPH_E2E_SECRET\"", srv.URL+"/v1"), 1),
			`its model.base_url sends to host 127.0.0.1, which the policy's hosts ["api.example.com"] do not allow`},
		{strings.Replace(echo, `provider = "static"`, "provider = \"openai\"\nmodel = \"m\"\nbase_url = \"https://api.example.com/v1\"\napi_key_env = \"RALPH_E2E_SECRET\"", 1),
			`its model.api_key_env reads RALPH_E2E_SECRET from the worker's environment, which the policy's env_allow ["EXAMPLE_API_KEY"] does not name`},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = f.submit(c.cfg)
	}
	for i, c := range cases {
		s := f.waitFinal(ids[i])
		if want := "job refused by worker policy " + policy + ": " + c.want; s.State != fleet.StateFailed || s.Deliveries != 1 || !strings.HasPrefix(s.Error, want) {
			t.Errorf("job %d: state %+v; want failed on its first delivery with %q", i, s, want)
		}
	}
	for _, p := range []string{hookOut, notifyOut} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): sh ran", p, err)
		}
	}
	if n := heard.Load(); n != 0 {
		t.Errorf("the endpoint the job named heard %d requests", n)
	}
}})

package fleet

import (
	"strings"
	"testing"
	"time"
)

// A worker without a policy refuses a job that brings its own shell_allow
// before anything of it runs: the run fails with the reason on its state,
// on its first delivery, and its job leaves the queue; a job within the
// default policy runs on the same worker.
func TestWorkerDefaultPolicyRefuses(t *testing.T) {
	fx := newFleetFixture(t)
	nc, hw := fx.connect()
	fx.worker("w", 1, 5*time.Second, nc, hw)
	_, h := fx.connect()
	evil := fx.submit(h, limitJob(1)+"[governance]\nshell_allow = [\"sh\"]\n")
	fine := fx.submit(h, limitJob(1))
	s := waitState(t, h, evil, "failed state", func(s RunState) bool { return Final(s.State) })
	want := `job refused by the worker's default policy (no --policy: no shell.exec, no program, no agent): its [governance].shell_allow names "sh", which the policy's shell_allow [] does not; run it on a worker whose --policy allows it`
	if s.State != StateFailed || s.Error != want || s.Reason != want || s.Condition != "worker" || s.Deliveries != 1 || !s.Started.IsZero() {
		t.Errorf("refused run: state %+v; want failed, not started, with %q", s, want)
	}
	if s := waitState(t, h, fine, "final state", func(s RunState) bool { return Final(s.State) }); s.State != StateLimit || s.Iteration != 1 {
		t.Errorf("a job within the default policy: state %+v", s)
	}
	waitNoPending(t, h)
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for k := range fx.charges {
		if strings.HasPrefix(k, evil) {
			t.Errorf("the refused run charged: %s", k)
		}
	}
}

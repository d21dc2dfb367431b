package web

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/mcpserver"
)

// verifyView is the chain's verification as the run page shows it.
type verifyView struct {
	OK       bool     `json:"ok"`
	Text     string   `json:"text"`
	Problems []string `json:"problems,omitempty"`
	At       string   `json:"at"`
}

// verifyCache keeps the last verification of each store (by its
// directory): a run page shows it without verifying the whole chain again
// on every load.
type verifyCache struct {
	mu sync.Mutex
	by map[string]verifyView
}

func (c *verifyCache) get(run *mcpserver.Run) *verifyView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.by[dirOf(run)]; ok {
		return &v
	}
	return nil
}

func (c *verifyCache) put(run *mcpserver.Run, v verifyView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]verifyView{}
	}
	c.by[dirOf(run)] = v
}

// dirOf names the store run was read from.
func dirOf(run *mcpserver.Run) string {
	if d, ok := run.Reader.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return run.ID
}

// verifyPage is /runs/{id}/verify: the whole chain verified now (every
// hash, link, signature, Merkle root and index), then back to the run
// page, which shows the result.
func (s *Server) verifyPage(w http.ResponseWriter, r *http.Request) {
	run, _, ok := s.openRun(w, r)
	if !ok {
		return
	}
	defer run.Close()
	rep, err := run.VerifyWith(r.Context(), ledger.VerifyOptions{})
	if err != nil {
		s.failErr(w, r, fmt.Errorf("verify the chain of run %s: %w", run.ID, err))
		return
	}
	v := verifyView{OK: rep.OK(), At: s.o.Now().Format(time.TimeOnly)}
	if v.OK {
		v.Text = fmt.Sprintf("intact: %d actions to seq %d, %d checkpoint signature(s) checked", rep.Actions, rep.Head.Seq, rep.Checkpoints)
	} else {
		v.Text = fmt.Sprintf("broken: %d problem(s) in %d actions; the first at seq %d", len(rep.Problems), rep.Actions, rep.Problems[0].Seq)
		for _, p := range rep.Problems {
			v.Problems = append(v.Problems, fmt.Sprintf("seq %d: %s", p.Seq, p.Reason))
		}
	}
	s.verified.put(run, v)
	if wantsJSON(r) {
		writeJSON(w, v)
		return
	}
	http.Redirect(w, r, "/runs/"+run.ID+"#verify", http.StatusSeeOther)
}

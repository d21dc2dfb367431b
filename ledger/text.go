package ledger

import (
	"fmt"
	"slices"
	"strings"
)

// How the chain's reports read as text (ralph chain show, verify, prove).

// Text is the inclusion proof and how to check it by hand.
func (p *InclusionProof) Text() string {
	var b strings.Builder
	lh := LeafHash(p.ActionHash)
	fmt.Fprintf(&b, "action %d is leaf %d of the %d-leaf tree of %s\n", p.Seq, p.LeafIndex, p.Checkpoint.Seq, p.Checkpoint.Origin)
	fmt.Fprintf(&b, "action_hash %s\n", p.ActionHash)
	fmt.Fprintf(&b, "leaf_hash   %s\n", lh)
	fmt.Fprintf(&b, "root        %s\n", p.Checkpoint.Root)
	fmt.Fprintf(&b, "proof       %d hashes, leaf to root:\n", len(p.Hashes))
	for _, h := range p.Hashes {
		fmt.Fprintf(&b, "  %s\n", h)
	}
	b.WriteString("checkpoint:\n")
	b.Write(p.Checkpoint.Note)
	b.WriteString(`
To check: leaf_hash = SHA-256(0x00 ‖ action_hash); run the inclusion check of RFC 9162 §2.1.3.2
with fn = leaf index, sn = tree size − 1, r = leaf_hash over the proof hashes in order, each
interior node being SHA-256(0x01 ‖ left ‖ right); r must equal the root on the checkpoint's third
line (base64), and the checkpoint's signature must verify with the store's verifier key
(ralph chain key; ralph chain verify --since FILE checks a saved checkpoint).
`)
	return b.String()
}

// Name names the id the filter selects by.
func (f Filter) Name() string {
	switch {
	case f.RunID != "":
		return "run " + f.RunID
	case f.PlanID != "":
		return "plan " + f.PlanID
	}
	return "intent " + f.IntentID
}

// UnderIterations hangs each StopConditionsEvaluated (recorded under no
// parent) under the iteration it evaluated, the run's latest
// IterationStarted before it, so the tree shows it there instead of after
// the whole run. Only the display changes; acts is copied where it must be.
func UnderIterations(acts []Action) []Action {
	last := map[string]string{} // run → its latest IterationStarted
	var out []Action
	for i := range acts {
		a := &acts[i]
		switch {
		case a.Type == IterationStarted:
			last[a.RunID] = a.ActionID
		case a.Type == StopConditionsEvaluated && a.ParentActionID == "" && last[a.RunID] != "":
			if out == nil {
				out = slices.Clone(acts)
			}
			out[i].ParentActionID = last[a.RunID]
		}
	}
	if out == nil {
		return acts
	}
	return out
}

// TrustLine says which key the signatures were checked with.
func (rep VerifyReport) TrustLine() string {
	if rep.Pinned {
		return "trusted key " + rep.TrustedKey + " (pinned with --key)"
	}
	return "trusted key " + rep.TrustedKey + " (recorded in the store; pass --key to pin it)"
}

// Text says what verifying the bundle at path proved: its actions,
// checkpoints and Merkle root, and the keys trusted, and why.
func (rep BundleReport) Text(path string) string {
	trust := " (named by the bundle; pass --key to pin it)"
	if len(rep.Keys) > 1 {
		trust = " (named by the bundle; pass --key for each to pin them)"
	}
	if rep.Pinned {
		trust = " (pinned with --key)"
	}
	keys := "key " + rep.Key
	if len(rep.Keys) > 1 {
		keys = "keys " + strings.Join(rep.Keys, ", ")
	}
	return fmt.Sprintf("verified bundle %s: %d actions, %d checkpoints, Merkle root %s\ntrusted %s%s\n",
		path, rep.Actions, rep.Checkpoints, rep.Root, keys, trust)
}

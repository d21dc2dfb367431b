package ledger

// IterationStatus is how an iteration ended: the "status" metadata of its
// IterationCompleted (and :status of its result).
type IterationStatus string

// Iteration statuses.
const (
	StatusOK            IterationStatus = "ok"             // its plan ran to the end
	StatusSkipped       IterationStatus = "skipped"        // skipped by the user, or its plan declined
	StatusFailed        IterationStatus = "failed"         // its plan (or an after_iteration hook) failed
	StatusCancelled     IterationStatus = "cancelled"      // an abort, a signal or max_duration cut it
	StatusRefused       IterationStatus = "refused"        // governance refused its plan
	StatusProviderError IterationStatus = "provider-error" // no plan could be had
	StatusUsageLimit    IterationStatus = "usage-limit"    // an agent hit its account limit: not counted, it runs again
)

// Succeeded says whether the iteration ended without a failure: it ran
// its plan, or was skipped.
func (s IterationStatus) Succeeded() bool { return s == StatusOK || s == StatusSkipped }

// StatusOf is the status a that records an iteration's end says ("" for
// any other action).
func StatusOf(a *Action) IterationStatus {
	if a.Type != IterationCompleted {
		return ""
	}
	return IterationStatus(a.Metadata["status"].Str())
}

package ledger

import "fmt"

// ActionType says what kind of event an action records. Its name (String)
// is what the canonical encoding and the JSON form carry, so names are
// stable; the numeric values are for this process only. The zero value is
// invalid, so an action whose type was forgotten is refused.
type ActionType uint8

// Action types: the plan, step and execution lifecycles of seed 001 §3.2,
// then the run, iteration, planning, governance, contract, compensation and
// stop-condition events of a ralph loop (DESIGN §6).
const (
	TypeInvalid ActionType = iota

	// Plan lifecycle.
	PlanStarted
	PlanCompleted
	PlanAborted
	PlanPaused
	PlanResumed

	// Step lifecycle.
	PlanStepStarted
	PlanStepCompleted
	PlanStepFailed
	PlanStepRetrying

	// Execution.
	CapabilityCall
	InternalStep

	// Runs and iterations of the loop.
	RunStarted
	RunCompleted
	RunFailed
	RunStopped
	RunAborted
	IterationStarted
	IterationCompleted

	// Planning and governance.
	PlanGenerated
	LlmConsultation
	GovernanceDecision

	// Contracts and compensations (seed 002).
	ContractCheck
	ContractViolation
	CompensationStarted
	CompensationCompleted
	CompensationFailed

	// Stop conditions and idempotency.
	StopConditionsEvaluated
	CapabilityDeduplicated

	// Agents (DESIGN §12).
	AgentToolUse  // one tool an agent used during an agent.run call; a child of that CapabilityCall
	RateLimitWait // the runner waited for an account limit to lift before running the iteration again

	// Fleets (DESIGN §17).
	ControlRequested // a fleet member asked for a control (pause, resume, skip, abort, approve, decline); who is on it

	// Reach (DESIGN §20).
	HookRan      // a [[hook]] command ran: its exit and output tail
	NotifyFailed // a [[notify]] sink could not deliver a notification

	// Checkpoints (DESIGN §19).
	WorkspaceRestored // ralph rollback put the run's work tree back to a checkpoint; after the run's closing action

	// Backlogs (DESIGN §23): a batch run and its tasks, each task one or
	// more child runs; all on the batch's run_id.
	BatchStarted // a batch began: its source, target, parallel, retries and integrate
	TaskStarted  // a task's child run began: :task, :source, :run (the child run's id)
	TaskEnded    // a task's child run ended: :verdict (merged, conflict, failed, …), :run
	TaskMerged   // the merge queue landed a task on the target: :commit

	numActionTypes
)

var actionTypeNames = [numActionTypes]string{
	TypeInvalid:             "",
	PlanStarted:             "PlanStarted",
	PlanCompleted:           "PlanCompleted",
	PlanAborted:             "PlanAborted",
	PlanPaused:              "PlanPaused",
	PlanResumed:             "PlanResumed",
	PlanStepStarted:         "PlanStepStarted",
	PlanStepCompleted:       "PlanStepCompleted",
	PlanStepFailed:          "PlanStepFailed",
	PlanStepRetrying:        "PlanStepRetrying",
	CapabilityCall:          "CapabilityCall",
	InternalStep:            "InternalStep",
	RunStarted:              "RunStarted",
	RunCompleted:            "RunCompleted",
	RunFailed:               "RunFailed",
	RunStopped:              "RunStopped",
	RunAborted:              "RunAborted",
	IterationStarted:        "IterationStarted",
	IterationCompleted:      "IterationCompleted",
	PlanGenerated:           "PlanGenerated",
	LlmConsultation:         "LlmConsultation",
	GovernanceDecision:      "GovernanceDecision",
	ContractCheck:           "ContractCheck",
	ContractViolation:       "ContractViolation",
	CompensationStarted:     "CompensationStarted",
	CompensationCompleted:   "CompensationCompleted",
	CompensationFailed:      "CompensationFailed",
	StopConditionsEvaluated: "StopConditionsEvaluated",
	CapabilityDeduplicated:  "CapabilityDeduplicated",
	AgentToolUse:            "AgentToolUse",
	RateLimitWait:           "RateLimitWait",
	ControlRequested:        "ControlRequested",
	HookRan:                 "HookRan",
	NotifyFailed:            "NotifyFailed",
	WorkspaceRestored:       "WorkspaceRestored",
	BatchStarted:            "BatchStarted",
	TaskStarted:             "TaskStarted",
	TaskEnded:               "TaskEnded",
	TaskMerged:              "TaskMerged",
}

var actionTypeByName = func() map[string]ActionType {
	m := make(map[string]ActionType, numActionTypes)
	for t := PlanStarted; t < numActionTypes; t++ {
		m[actionTypeNames[t]] = t
	}
	return m
}()

// ActionTypes returns every valid action type in declaration order.
func ActionTypes() []ActionType {
	out := make([]ActionType, 0, numActionTypes-1)
	for t := PlanStarted; t < numActionTypes; t++ {
		out = append(out, t)
	}
	return out
}

// String returns the type's stable name, e.g. "CapabilityCall".
func (t ActionType) String() string {
	if t.Valid() {
		return actionTypeNames[t]
	}
	return fmt.Sprintf("ActionType(%d)", uint8(t))
}

// Valid reports whether t is one of the declared types.
func (t ActionType) Valid() bool { return t > TypeInvalid && t < numActionTypes }

// ParseActionType returns the type with the given name. Names are
// case-sensitive, exactly as String returns them.
func ParseActionType(name string) (ActionType, error) {
	if t, ok := actionTypeByName[name]; ok {
		return t, nil
	}
	return TypeInvalid, fmt.Errorf("unknown action type %q", name)
}

// MarshalText encodes t as its name.
func (t ActionType) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid action type %d", uint8(t))
	}
	return []byte(actionTypeNames[t]), nil
}

// UnmarshalText decodes a type from its name.
func (t *ActionType) UnmarshalText(b []byte) error {
	v, err := ParseActionType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

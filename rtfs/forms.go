package rtfs

// The plan forms: the special forms that make a plan's steps (seed 001),
// which the compiler, the arbiter's canonical IR, governance's admission
// and the UI all recognise by these names.
const (
	FormPlan             = "plan"
	FormStep             = "step"
	FormStepLoop         = "step-loop"
	FormStepParallel     = "step-parallel"
	FormWithCompensation = "step.with-compensation"
	FormCall             = "call"
)

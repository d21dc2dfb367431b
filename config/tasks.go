package config

// Tasks is the [tasks] section (DESIGN §23): the backlog a run works
// through as a batch, one child run per task. It is decoded with its
// positions and checked for what needs no other package; what a source
// spec and integrate mean is the tasks package's (the batch checks them
// with ErrorAtValue, naming file:line:col).
type Tasks struct {
	// Source is the task source as `ralph run --tasks` takes it: prd:FILE,
	// checklist:FILE, github:OWNER/REPO?label=L, beads, or a bare path
	// ending in .json (prd) or .md (checklist). A relative FILE is
	// relative to the config file's directory.
	Source string `toml:"source"`
	// Parallel is how many tasks run at once (0: 1).
	Parallel int `toml:"parallel"`
	// Target is the branch merged tasks land on ("": the prd's
	// branchName, else ralph/<batch>/merged).
	Target string `toml:"target"`
	// Attempts is how many loops work on one task at once; the first
	// whose conditions hold on the merged tree wins (0: 1).
	Attempts int `toml:"attempts"`
	// Retries is how many times a task whose merge conflicts or whose
	// re-run on the merged tree is red goes back to its loop (nil: 2).
	Retries *int `toml:"retries"`
	// Integrate is how a task meets the target's tip: "rebase" (the
	// default) or "merge".
	Integrate string `toml:"integrate"`
	// CloseIssues closes a GitHub issue when its task merges (it is
	// otherwise only commented on and labelled).
	CloseIssues bool `toml:"close_issues"`
}

// DefaultTaskRetries is [tasks] retries when it is not set.
const DefaultTaskRetries = 2

// TaskRetries is [tasks] retries, or its default.
func (t *Tasks) TaskRetries() int {
	if t == nil || t.Retries == nil {
		return DefaultTaskRetries
	}
	return *t.Retries
}

// validateTasks checks [tasks]'s numbers, naming the value's line and
// column.
func (c *Config) validateTasks(file string) error {
	t := c.Tasks
	if t == nil {
		return nil
	}
	at := func(key, msg string) error {
		line, col := c.Pos(key)
		return &Error{File: file, Line: line, Col: col, Msg: msg}
	}
	switch {
	case t.Parallel < 0:
		return at("tasks.parallel", "tasks.parallel must be at least 1 (tasks at once), or left out for 1")
	case t.Attempts < 0:
		return at("tasks.attempts", "tasks.attempts must be at least 1 (loops per task), or left out for 1")
	case t.Retries != nil && *t.Retries < 0:
		return at("tasks.retries", "tasks.retries must not be negative; 0 ends a task at its first conflict or red re-run")
	}
	return nil
}

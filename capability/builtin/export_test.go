package builtin

import "github.com/ralphloop/ralph/capability"

// What the external tests (package builtin_test, which may import the
// packages that use capabilities: governance, loop, assemble) share with
// the internal ones.
var (
	RemoveRow    = unregister
	Undocumented = undocumented
)

// AddRow adds a built-in capability, as a row of the table does: spec and
// the handler a run gets of its workdir.
func AddRow(spec *capability.Spec, handler func(workdir string) capability.Handler) error {
	return register(row{spec: spec, handler: func(h *host) capability.Handler { return handler(h.workdir) }})
}

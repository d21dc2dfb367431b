// Package usage marks an error as the user's to fix by changing what they
// passed (a flag, an argument, a file, a URL): a usage error, exit 2 in
// DESIGN §3. The packages below cli return one where a command's user is
// at fault; cli maps it to its exit code in one place (commandError) and
// reports any other error of theirs as a failure at run time (exit 1).
//
// Invariant: an Error says what its wrapped error says, byte for byte.
package usage

import "fmt"

// Error is a usage error. Help asks for a pointer to the command's --help
// after the sentence: the command line itself cannot be run as given.
type Error struct {
	Err  error
	Help bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is a usage error saying what format says.
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Flagf is Errorf for a command line that cannot be run as given.
func Flagf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...), Help: true}
}

// Wrap marks err as a usage error; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

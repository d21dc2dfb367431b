package rtfs

import (
	"errors"
	"fmt"
)

// Error types (the :type of a caught error map). Read and compile errors are
// reported before anything runs; the rest are raised by evaluation.
const (
	ErrRead      = "rtfs/read-error"
	ErrCompile   = "rtfs/compile-error"
	ErrType      = "rtfs/type-error"
	ErrArity     = "rtfs/arity-error"
	ErrArith     = "rtfs/arithmetic-error"
	ErrIndex     = "rtfs/index-error"
	ErrValue     = "rtfs/value-error"
	ErrFuel      = "rtfs/fuel-exhausted"
	ErrDepth     = "rtfs/depth-exceeded"
	ErrCancelled = "rtfs/cancelled"
	ErrHost      = "rtfs/host-error"
	ErrThrown    = "rtfs/thrown"
)

// ErrPlanFormInPureCode is what errors.Is finds in the compile error for a
// call or step* form written where code must be pure (a contract, metadata,
// a predicate), so callers need not read the message.
var ErrPlanFormInPureCode = errors.New("plan form in pure code")

// Error is an RTFS error with a source position. It prints as
// "file:line:col: message".
type Error struct {
	Type  string // keyword text without colon, e.g. "rtfs/type-error"
	Msg   string
	File  string
	Pos   Pos
	Data  Value // optional extra data (ex-info map)
	cause error
}

func (e *Error) Error() string {
	file := e.File
	if file == "" {
		file = "<input>"
	}
	if e.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", file, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", file, e.Pos.Line, e.Pos.Col, e.Msg)
}

// Unwrap returns the host error this error wraps, if any.
func (e *Error) Unwrap() error { return e.cause }

// Fatal reports whether the error ends evaluation regardless of try/catch:
// fuel exhaustion, depth limit and cancellation cannot be caught.
func (e *Error) Fatal() bool {
	return e.Type == ErrFuel || e.Type == ErrDepth || e.Type == ErrCancelled
}

// ErrorMap renders the error as the map bound by catch:
// {:type :rtfs/… :message "…" :line n :col n} plus :data when present.
func (e *Error) ErrorMap() Value {
	b := NewMapBuilder(5)
	b.Set(Keyword("type"), Keyword(e.Type))
	b.Set(Keyword("message"), String(e.Msg))
	b.Set(Keyword("line"), Int(int64(e.Pos.Line)))
	b.Set(Keyword("col"), Int(int64(e.Pos.Col)))
	if !e.Data.IsNil() {
		b.Set(Keyword("data"), e.Data)
	}
	return MapValue(b.Map())
}

func errorf(typ string, pos Pos, format string, args ...any) *Error {
	return &Error{Type: typ, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// TypedError lets host errors choose their :type keyword in catch maps.
type TypedError interface {
	error
	RTFSType() string
}

// errAt converts err to *Error positioned at pos (if it has no position)
// and naming the machine's file (if it names none).
func (m *Machine) errAt(err error, pos Pos) *Error {
	e := asError(err, pos)
	if e.File == "" && m.file != "" {
		if e == err {
			c := *e
			e = &c
		}
		e.File = m.file
	}
	return e
}

// asError converts any error to *Error, positioning it at pos if it has none.
func asError(err error, pos Pos) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Pos.Line == 0 {
			c := *e
			c.Pos = pos
			return &c
		}
		return e
	}
	typ := ErrHost
	var te TypedError
	if errors.As(err, &te) {
		typ = te.RTFSType()
	}
	return &Error{Type: typ, Msg: err.Error(), Pos: pos, cause: err}
}

package agent

import (
	"bytes"
	"time"
)

// commandBackend runs any argv (Options.Command), prompt on stdin, and
// takes its standard output as plain text, one EventText per line.
func commandBackend() backend {
	return backend{
		Facts: Facts{Name: "command", TakesCommand: true},
		argv: func(path string, o *Options) []string {
			argv := append([]string{path}, o.Command[1:]...)
			return append(argv, o.Args...)
		},
		stdin:     true,
		newParser: func(func() time.Time) parser { return textParser{} },
	}
}

// textParser keeps every line as text: the lines of one read in one
// EventText (without their carriage returns), a line at a time when
// read line by line.
type textParser struct{}

func (textParser) line(b []byte, emit func(Event)) { emit(Event{Kind: EventText, Text: string(b)}) }

func (textParser) block(b []byte, emit func(Event)) {
	if bytes.IndexByte(b, '\r') >= 0 {
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	}
	b = bytes.Trim(b, "\r\n")
	if len(b) > 0 {
		emit(Event{Kind: EventText, Text: string(b)})
	}
}

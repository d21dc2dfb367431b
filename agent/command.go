package agent

import "time"

// commandBackend runs any argv (Options.Command), prompt on stdin, and
// takes its standard output as plain text, one EventText per line.
func commandBackend() backend {
	return backend{
		name: "command",
		argv: func(path string, o *Options) []string {
			argv := append([]string{path}, o.Command[1:]...)
			return append(argv, o.Args...)
		},
		stdin:     true,
		newParser: func(func() time.Time) parser { return textParser{} },
	}
}

// textParser keeps every line as text.
type textParser struct{}

func (textParser) line(b []byte, emit func(Event)) { emit(Event{Kind: EventText, Text: string(b)}) }

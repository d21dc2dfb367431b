package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Starter is the commented ralph.toml that `ralph init` writes. It runs as
// is: a static plan, bounded by max_iterations, that needs no API key.
const Starter = `# ralph.toml — a Ralph loop: plan, check, execute, record, decide whether to stop.
# Paths are relative to this file. Unknown keys are errors, so typos cannot hide.

[intent]
goal = "Show that the loop plans, executes and stops"
prompt_file = "PROMPT.md"             # appended to the goal for model providers
params = { greeting = "hello" }       # the plan sees these as (:greeting ctx)

[model]
provider = "static"                   # openai | static | script | command
# model = "gpt-4o-mini"               # provider = "openai": any OpenAI-compatible server
# base_url = "http://localhost:11434/v1"   # or env OPENAI_BASE_URL (Ollama, vLLM, llama.cpp, OpenRouter)
# api_key_env = "OPENAI_API_KEY"      # the key is read from this env var, never stored
# max_repairs = 2
# command = ["claude", "-p"]          # provider = "command": prompt on stdin, plan on stdout
# script = "responses.jsonl"          # provider = "script": canned answers, in order

[plan]                                # provider = "static": the same plan every iteration
rtfs = '''
(do
  (step "Greet" (call :ccos.echo {:message (str (:greeting ctx) ", iteration " (:iteration ctx))}))
  (step "Add" (call :ccos.math.add 2 3)))
'''

[loop]
delay = "0s"
workdir = "."
approve = false                       # ask before executing each plan

[[stop]]
name = "enough"
kind = "max_iterations"
max = 3

# [[stop]]
# name = "tests-green"
# kind = "command"
# cmd = ["go", "test", "./..."]
# must_match = "ok"                   # refuse "no test files" as green
# class = "success"

[governance]
allow = ["ccos.*", "fs.*", "kv.*", "shell.exec"]
shell_allow = []                      # e.g. ["go", "git"]

[store]
dir = ".ralph"
sync_writes = true
`

// StarterPrompt is the PROMPT.md that `ralph init` writes.
const StarterPrompt = `# Prompt

Describe the task here. Model providers receive this text after the goal,
together with the capability inventory and feedback from the last iteration.
`

// WriteStarter writes ralph.toml and PROMPT.md into dir, refusing to
// overwrite existing files.
func WriteStarter(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return writeNew(dir, []starterFile{{"ralph.toml", Starter}, {"PROMPT.md", StarterPrompt}})
}

type starterFile struct{ name, body string }

// writeNew writes files into dir, refusing before it writes any of them when
// one already exists. It returns the paths it wrote.
func writeNew(dir string, files []starterFile) ([]string, error) {
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			return nil, fmt.Errorf("%s already exists; remove it or choose another directory", filepath.Join(dir, f.name))
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	var written []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

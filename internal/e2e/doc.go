// Package e2e is the one driver of ralph's end-to-end tests, which run the
// built binary as a user would: headless with real exit codes, in the
// background with signals, and in a real terminal (tmux) for the UI.
//
// Tests are values (Test) with a name, what they need of the machine, the
// files they start from and a Run step; one runner (Suite.Run, called by
// the package's one TestE2E) runs them. The runner owns what every test
// used to do for itself:
//
//   - the binary, built once by Suite.Main before the tests (with -race
//     under RALPH_E2E_RACE=1, as make test-race-e2e does);
//   - the one skip: under -short TestE2E skips, and no test skips itself
//     for want of the binary;
//   - what a test needs (Test.Needs: a tool, a file, an ability only trying
//     shows), checked before the test runs through internal/testenv, which
//     skips saying what is missing, or fails under RALPH_CI=1;
//   - an environment of the test's own (E.Env): XDG_CONFIG_HOME,
//     XDG_STATE_HOME and XDG_RUNTIME_DIR under E.Home, a directory of its
//     own (E.Dir), and none of the developer's RALPH_KEY, RALPH_NATS,
//     RALPH_NATS_CREDS or RALPH_STORE;
//   - the ways to run ralph, all from one description of the command (Cmd:
//     args, directory, environment, stdin): Run to completion with its
//     stdout, stderr and exit code; Start in the background and read its
//     lines, signal it, and Wait for it; Term in a 120×40 terminal;
//   - the terminal: a tmux server of the test process's own, keys, the
//     screen, and the wait on what the UI says it has drawn (Term.WaitIdle);
//   - the browser: one headless Chromium (Debian's, at ChromiumPath) for the
//     whole test process, started by the first test that opens a page
//     (E.Page) and stopped once the tests end; each page is a tab in a
//     browser context of its own (no cookie is shared between tests), and
//     a script error a page does not catch fails its test.
//
// Every wait is bounded by internal/eventually's bound, which only guards
// against a hang; a command that outlives it gets SIGQUIT first, so the
// failure shows where its goroutines were. No test measures time with it.
//
// # A package's end-to-end tests
//
//	var suite = &e2e.Suite{Package: "github.com/ralphloop/ralph"}
//
//	func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
//
//	func TestE2E(t *testing.T) { suite.Run(t) }
//
// `go test -run 'E2E/Quickstart$'` runs one test; `-run 'E2E/MCP'` every
// test whose name has MCP in it.
//
// # Adding a test
//
// Add a row beside the tests of the same command, in that command's
// *_e2e_test.go file:
//
//	// What the test shows, in a sentence or two.
//	var _ = suite.Add(e2e.Test{Name: "RunTUIInTerminal", Needs: []e2e.Need{e2e.Tmux},
//		Files: map[string]string{"ralph.toml": quickstart},
//		Run: func(t *testing.T, e *e2e.E) {
//			tm := e.Ralph("run", "ralph.toml", "--store", "store").In(e.Dir).Term()
//			screen := tm.WaitIdle(e2e.UntilEnd)
//			...
//			tm.Send("q")
//			if code := tm.Exit(); code != 0 { ... }
//		}})
//
// A test runs in parallel with the others unless it says Serial. It names
// what it needs of the machine in Needs (e2e.Tmux for a terminal,
// e2e.Chromium for a page, e2e.Tool
// for another program, e2e.File, e2e.Probe); a subtest that alone needs
// something says so in E.Run. It never calls t.Skip for a missing tool
// and never builds or finds the binary itself.
//
// In a terminal, wait for what the run recorded with Term.WaitIdle at the
// seq that names it (UntilEnd for the run's end), then read the screen;
// wait on the screen itself (Term.WaitFor, Term.WaitScreen) only for what
// no seq names: a prompt, a dialog, a view a key opened, a running time,
// what ralph prints once its UI has ended.
package e2e

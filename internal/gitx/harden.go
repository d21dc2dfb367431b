package gitx

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// hardened are the options every git ralph runs is given before its own
// arguments: the work tree's .git is writable by the agent (and by
// anything it starts), so nothing written there may make ralph's git run
// a program. Hooks and the fsmonitor are off; no pager, editor or commit
// signing (gpg.program) is started; the ext:: transport, whose URL is a
// command, is refused whatever the repository allows; submodules are not
// recursed into (their configs are the agent's too). The keys whose
// values are programs that git reads from a repository's own config
// (filters, credential helpers, ssh and askpass commands, a remote's
// upload-pack, a merge driver) are neutralised per command by
// repoOverrides; external diffs and textconv are turned off by every
// diff's --no-ext-diff --no-textconv.
var hardened = []string{
	"--no-pager",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "core.editor=:",
	"-c", "sequence.editor=:",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "log.showSignature=false",
	"-c", "protocol.ext.allow=never",
	"-c", "submodule.recurse=false",
	"-c", "fetch.recurseSubmodules=false",
}

// programKeys matches the config keys (as git canonicalises them:
// section and name lower-case) whose values git runs as programs and
// that a repository's own config may set: repoOverrides resets each one
// the repository sets.
const programKeys = `^(core\.(sshcommand|askpass|alternaterefscommand|gitproxy)|credential\..*helper|` +
	`filter\..*\.(clean|smudge|process)|merge\..*\.driver|remote\..*\.(uploadpack|receivepack))$`

// pureRefCommands are the git commands that read or write only objects,
// refs and config, never a work tree file (write-tree and ls-files may
// refresh the index, which runs a clean filter; merge-tree runs merge
// drivers): the repository's program keys cannot reach them, so they run
// without the look-up.
var pureRefCommands = map[string]bool{
	"rev-parse": true, "update-ref": true, "cat-file": true, "symbolic-ref": true, "merge-base": true,
	"config": true, "commit-tree": true, "ls-tree": true, "check-ignore": true, "for-each-ref": true,
	"rev-list": true,
}

// subcommand is the index in args of the git command they run, after
// the global options gitx's callers use (-c KEY=VALUE, -C DIR,
// --opt=value); len(args) when there is none.
func subcommand(args []string) int {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case !strings.HasPrefix(a, "-"):
			return i
		}
	}
	return len(args)
}

// ConfigError is a repository whose own config sets a key ralph cannot
// neutralise and will not run git under.
type ConfigError struct {
	Dir, Key, Value string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("the git repository of %s sets %s = %q in its own config, which would make ralph's git run a program; "+
		"remove it (git config --local --unset-all %s) or set it in your global config instead", e.Dir, e.Key, e.Value, e.Key)
}

// repoOverrides are the -c options that take back from the repository
// (local or worktree scope, and what those include) every program key it
// sets, so that git runs what the user's own (global, system) config
// chose, or nothing: a filter's clean, smudge and process become empty
// (no filter; the file is taken as it is), a credential helper list is
// reset to the user's, core.askPass to the user's or none, core.sshCommand
// to the user's or plain ssh, core.alternateRefsCommand to the user's or
// `true` (no extra tips), a merge driver to the user's or git's own
// three-way text merge (textMerge). core.gitProxy and a remote's uploadpack and
// receivepack cannot be taken back (git takes the first value it reads,
// and -c comes last): a repository that sets one is a *ConfigError.
func repoOverrides(ctx context.Context, dir string, globals []string) ([]string, error) {
	out, err := lookupConfig(ctx, dir, globals)
	if err != nil || out == "" {
		return nil, nil // no repository (clone, init) or no such key: nothing to take back
	}
	type entry struct{ scope, key, value string }
	var all []entry
	f := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		key, value, _ := strings.Cut(f[i+1], "\n")
		all = append(all, entry{f[i], key, value})
	}
	var opts []string
	done := map[string]bool{}
	for _, e := range all {
		if (e.scope != "local" && e.scope != "worktree") || done[e.key] {
			continue
		}
		done[e.key] = true
		if e.key == "core.gitproxy" || strings.HasSuffix(e.key, ".uploadpack") || strings.HasSuffix(e.key, ".receivepack") {
			return nil, &ConfigError{Dir: dir, Key: e.key, Value: e.value}
		}
		var user []string
		for _, u := range all {
			if u.key == e.key && (u.scope == "global" || u.scope == "system") {
				user = append(user, u.value)
			}
		}
		opts = append(opts, takeBack(e.key, user)...)
	}
	return opts, nil
}

// textMerge is the merge driver that stands for one the repository's own
// config names (merge.<driver>.driver, chosen for a path by the agent's
// .gitattributes): git's built-in three-way text merge, as git
// merge-file, which writes the result with conflict markers over %A and
// exits non-zero when there are conflicts, as a driver must.
const textMerge = "git merge-file -L ours -L base -L theirs --marker-size=%L %A %O %B"

// takeBack is the -c options that give key the user's values (in order)
// instead of the repository's.
func takeBack(key string, user []string) []string {
	set := func(v string) []string { return []string{"-c", key + "=" + v} }
	last := func(dflt string) []string {
		if len(user) > 0 {
			return set(user[len(user)-1])
		}
		return set(dflt)
	}
	switch {
	case strings.HasPrefix(key, "credential."):
		opts := set("") // an empty helper resets the list
		for _, u := range user {
			opts = append(opts, set(u)...)
		}
		return opts
	case strings.HasPrefix(key, "filter."):
		driver := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(key, ".clean"), ".smudge"), ".process")
		return append(set(""), "-c", driver+".required=false")
	case strings.HasPrefix(key, "merge."):
		return last(textMerge)
	case key == "core.sshcommand":
		return last("ssh")
	case key == "core.alternaterefscommand":
		return last("true")
	}
	return last("") // core.askpass: none
}

// lookupConfig lists the program keys set in the config of the repository
// git finds from dir with globals (--git-dir=…), with their scopes
// ("scope\0key\nvalue\0" each); "" when none is set or there is no
// repository. Reading config runs no program.
func lookupConfig(ctx context.Context, dir string, globals []string) (string, error) {
	args := append(append([]string(nil), globals...), "config", "--null", "--show-scope", "--get-regexp", programKeys)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := procgroup.Run(cmd, 5*time.Second); err != nil {
		return "", err // exit 1: no key matched
	}
	return stdout.String(), nil
}

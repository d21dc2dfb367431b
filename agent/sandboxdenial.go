package agent

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ralphloop/ralph/sandbox"
)

// refusedPath are the ways tools say the system refused them a path, each
// with the path as its one group: coreutils and shells ("cat: /p:
// Permission denied", "touch: cannot touch '/p': Read-only file system"),
// Go ("open /p: permission denied"), Python ("[Errno 13] Permission
// denied: '/p'") and Node ("EACCES: permission denied, open '/p'"). Only
// an absolute path counts: a relative one is in the workdir, which the
// sandbox never refuses.
var refusedPath = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(?:^|[\s'"‘])(/[^\s'"’:]+)['"’]?: (?:permission denied|operation not permitted|read-only file system)\b`),
	regexp.MustCompile(`(?i)(?:permission denied|operation not permitted|read-only file system): '(/[^']+)'`),
	regexp.MustCompile(`\b(?:EACCES|EPERM|EROFS): [a-z -]+, [a-z]+ '(/[^']+)'`),
}

// writeWords in a refusal's line say the tool was writing, not reading.
var writeWords = regexp.MustCompile(`(?i)cannot (?:create|touch|remove|make|move|overwrite|write)|read-only file system|\bEROFS\b|` +
	`\b(?:mkdir|unlink|rename|rmdir|chmod|write|creat|openat2?\(.*O_(?:WRONLY|RDWR|CREAT))`)

// writeTools are the words in a tool's name that make it one that writes
// files (Claude's Write, Edit, MultiEdit; Gemini's write_file, replace;
// Codex's apply_patch; OpenCode's write, edit, patch).
var writeTools = []string{"write", "edit", "patch", "replace", "create"}

// PathRefusal reads, in the text of a tool result that failed, a path the
// system refused the tool outside workdir, as the sandbox refuses what it
// does not allow: the refusal as the run records it, with the [sandbox]
// line that allows it (read, or write when the tool writes files, the
// line says it was writing, or the tool's input redirects into the path).
// It is conservative: a path inside workdir (an ordinary permission), a
// relative path, or words it does not know are no refusal.
func PathRefusal(tool, input, text, workdir string) (sandbox.Denial, bool) {
	for _, line := range strings.Split(text, "\n") {
		for _, re := range refusedPath {
			m := re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			path := filepath.Clean(m[1])
			if inside(workdir, path) {
				continue
			}
			op := sandbox.OpRead
			if writesFiles(tool) || writeWords.MatchString(line) || redirectsInto(input, path) {
				op = sandbox.OpWrite
			}
			return sandbox.PathDenial(op, path), true
		}
	}
	return sandbox.Denial{}, false
}

// writesFiles reports whether tool is one that writes files.
func writesFiles(tool string) bool {
	t := strings.ToLower(tool)
	for _, w := range writeTools {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// redirectsInto reports whether a shell command's input redirects output
// into path (> path, >> path, tee path).
func redirectsInto(input, path string) bool {
	for _, pre := range []string{">", ">>", "> ", ">> ", "tee ", "tee -a "} {
		for _, q := range []string{"", "'", `"`} {
			if strings.Contains(input, pre+q+path) {
				return true
			}
		}
	}
	return false
}

// inside reports whether path is dir or below it ("" dir: nothing is).
func inside(dir, path string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// RefusalLine is how the console and the UI show a refusal of the run's
// sandbox, as they show a permission denial: what was refused and the
// [sandbox] line that allows it.
func RefusalLine(d sandbox.Denial) string {
	if d.Allow == "" {
		return "sandbox refused " + d.What
	}
	return "sandbox refused " + d.What + "; to allow it, add " + d.Allow + " to [sandbox]"
}

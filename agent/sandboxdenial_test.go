package agent

import (
	"testing"

	"github.com/ralphloop/ralph/sandbox"
)

func TestPathRefusal(t *testing.T) {
	const wd = "/work/project"
	read := func(p string) sandbox.Denial { return sandbox.PathDenial(sandbox.OpRead, p) }
	write := func(p string) sandbox.Denial { return sandbox.PathDenial(sandbox.OpWrite, p) }
	for _, c := range []struct {
		name, tool, input, text string
		want                    sandbox.Denial
		ok                      bool
	}{
		{"coreutils read", "Bash", "cat ~/.ssh/id_ed25519", "cat: /root/.ssh/id_ed25519: Permission denied", read("/root/.ssh/id_ed25519"), true},
		{"coreutils touch", "Bash", "touch /etc/x", "touch: cannot touch '/etc/x': Permission denied", write("/etc/x"), true},
		{"read-only bind", "shell", "mkdir /usr/local/x", "mkdir: cannot create directory ‘/usr/local/x’: Read-only file system", write("/usr/local/x"), true},
		{"shell redirect", "Bash", "echo hi > /opt/out.txt", "bash: line 1: /opt/out.txt: Permission denied", write("/opt/out.txt"), true},
		{"go", "Bash", "go run .", "panic: open /root/.aws/credentials: permission denied", read("/root/.aws/credentials"), true},
		{"python", "Bash", "python3 x.py", "PermissionError: [Errno 13] Permission denied: '/home/u/other/secret.txt'", read("/home/u/other/secret.txt"), true},
		{"node", "Bash", "node x.js", "Error: EACCES: permission denied, open '/root/.netrc'", read("/root/.netrc"), true},
		{"write tool", "Write", "/srv/app/config.yml", "EACCES: permission denied, open '/srv/app/config.yml'", write("/srv/app/config.yml"), true},
		{"gemini write_file", "write_file", "", "Error writing file: /var/lib/x.txt: Operation not permitted", write("/var/lib/x.txt"), true},
		{"second line", "Bash", "ls", "total 0\nls: cannot open directory '/root/.gnupg': Permission denied", read("/root/.gnupg"), true},
		{"inside the workdir", "Bash", "cat secret", "cat: /work/project/secret: Permission denied", sandbox.Denial{}, false},
		{"relative", "Bash", "cat secret", "cat: secret: Permission denied", sandbox.Denial{}, false},
		{"no refusal", "Bash", "go test", "--- FAIL: TestX\n    x_test.go:3: got 1", sandbox.Denial{}, false},
		{"other words", "Bash", "ssh host", "git@github.com: Permission denied (publickey).", sandbox.Denial{}, false},
	} {
		got, ok := PathRefusal(c.tool, c.input, c.text, wd)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: PathRefusal = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

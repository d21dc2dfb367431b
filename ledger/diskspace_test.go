//go:build linux

package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// mountTmpfs mounts a tmpfs of size (as mount takes it: "4m") on a new
// directory and unmounts it at the end; it skips the test where mounting
// is not permitted.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Need(t, "a tmpfs it may mount (root)", fmt.Sprintf("mounting a %s tmpfs is not permitted here (%v: %s)", size, err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			ls, _ := exec.Command("sh", "-c", "grep "+dir+" /proc/"+strconv.Itoa(os.Getpid())+"/maps").CombinedOutput()
			t.Errorf("umount %s: %v: %s\n%s", dir, err, out, ls)
		}
	})
	return dir
}

// fillTo writes a file in dir until the filesystem has about left bytes free.
func fillTo(t *testing.T, dir string, left int64) {
	t.Helper()
	free, _ := freeBytes(dir)
	if free <= left {
		return
	}
	f, err := os.CreateTemp(dir, "fill")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, free-left)); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
}

const fullChildEnv = "RALPH_LEDGER_FULL_CHILD_DIR"

// TestFullDiskChild is the process of one TestFullDiskIsAnErrorNotACrash
// case: it fills the disk under a store it writes, checks what commits,
// and closes the store; it exits 0 when all went as the case wants.
func TestFullDiskChild(t *testing.T) {
	dir := os.Getenv(fullChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestFullDiskIsAnErrorNotACrash")
	}
	var left int64
	closeCommits := os.Getenv(fullChildEnv+"_LEFT") != "0"
	if closeCommits {
		left = 600 << 10
	}
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, KeyDir: filepath.Join(filepath.Dir(dir), "keys")})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 100)
	fillTo(t, filepath.Dir(dir), left)
	_, err = s.Append(context.Background(), sample(100))
	var full *DiskFullError
	if !errors.As(err, &full) || full.Dir != dir {
		t.Fatalf("append on a full disk = %v", err)
	}
	t.Log(err)
	closing := sample(101)
	closing.Type = RunFailed
	if _, err = s.Append(context.Background(), closing); (err == nil) != closeCommits {
		t.Fatalf("closing append = %v, want it to commit: %v", err, closeCommits)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestFullDiskIsAnErrorNotACrash fills the tmpfs a store lives on, in a
// child process: an ordinary commit is refused with a DiskFullError naming
// the store, the action that closes the run still commits in the room kept
// for it, and everything committed reads back and verifies. With the disk
// full to the last block even that is refused, and Close leaves the
// memtable in its log instead of dying in Badger's flush; the store still
// opens and verifies, refuses a writer until space is freed, and then
// holds every action.
func TestFullDiskIsAnErrorNotACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		left string // "0": full to the last block
		want uint64 // actions committed
	}{
		{"nearly full", "600k", 101},
		{"full", "0", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := mountTmpfs(t, "4m")
			dir := filepath.Join(mnt, "store")
			cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), fullChildEnv+"="+dir, fullChildEnv+"_LEFT="+tc.left)
			out, err := cmd.CombinedOutput()
			t.Logf("child: %s", out)
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, dataDir, "LOCK")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the lock file is left: %v", err)
			}
			ro, err := Open(Options{Dir: dir, ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open after the disk filled: %v", err)
			}
			rep := mustVerify(t, ro)
			ro.Close()
			if rep.Actions != tc.want {
				t.Errorf("verified %d actions, want %d", rep.Actions, tc.want)
			}
			keys := filepath.Join(mnt, "keys")
			if tc.left == "0" {
				var full *DiskFullError
				if _, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, KeyDir: keys}); !errors.As(err, &full) {
					t.Fatalf("open for writing on a full disk = %v, want a DiskFullError", err)
				}
			}
			fills, _ := filepath.Glob(filepath.Join(mnt, "fill*"))
			for _, f := range fills {
				os.Remove(f)
			}
			s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, KeyDir: keys})
			if err != nil {
				t.Fatalf("open for writing once space is freed: %v", err)
			}
			defer s.Close()
			if rep := mustVerify(t, s); rep.Actions != tc.want {
				t.Errorf("after space was freed: verified %d actions, want %d", rep.Actions, tc.want)
			}
		})
	}
}

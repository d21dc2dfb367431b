package tasks

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
)

// benchRepo is the repository shape both benchmarks below use: the
// fixture's files and 200 Go files of 50 lines in 10 directories, one
// commit; and a mover, a work tree of its own that moves the target by
// one commit (another file changed) before each merge, as a task that
// landed first would.
type benchRepo struct {
	*repoFixture
	mover string
	n     int
}

func newBenchRepo(b *testing.B) *benchRepo {
	b.Helper()
	f := newRepoFixture(b)
	for i := range 200 {
		var src strings.Builder
		fmt.Fprintf(&src, "package d%d\n\n", i%10)
		for l := range 48 {
			fmt.Fprintf(&src, "// line %d of file %d\n", l, i)
		}
		f.write(f.dir, fmt.Sprintf("d%d/f%03d.go", i%10, i), src.String())
	}
	f.git(f.dir, "add", "-A")
	f.git(f.dir, "commit", "-q", "-m", "200 files")
	r := &benchRepo{repoFixture: f, mover: filepath.Join(f.home, "mover")}
	f.git(f.dir, "worktree", "add", "-q", "--detach", r.mover, "HEAD")
	return r
}

// move commits a change to one file on top of ref's commit and moves
// ref there.
func (r *benchRepo) move(ref string) {
	r.tb.Helper()
	tip := r.git(r.dir, "rev-parse", ref)
	r.git(r.mover, "checkout", "-q", "--detach", tip)
	r.n++
	r.write(r.mover, fmt.Sprintf("d%d/f%03d.go", r.n%10, 100+r.n%100), fmt.Sprintf("package d%d\n// moved %d\n", r.n%10, r.n))
	r.git(r.mover, "commit", "-q", "-am", fmt.Sprintf("move %d", r.n))
	r.git(r.dir, "update-ref", ref, r.git(r.mover, "rev-parse", "HEAD"), tip)
}

// change is one task's work: a line of one file of the first hundred
// (which the mover never touches) rewritten.
func (r *benchRepo) change(dir string, i int) {
	r.tb.Helper()
	name := fmt.Sprintf("d%d/f%03d.go", i%10, i%100)
	src := r.read(dir, name)
	r.write(dir, name, strings.Replace(src, "// line 7 ", fmt.Sprintf("// task %d, line 7 ", i), 1))
}

// childCPU is the CPU time (user and system) of this process's children
// that have ended: the git processes a benchmark ran. Unlike the wall
// time it hardly moves with the machine's load.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gitCPU sums the children's CPU time over the timed parts of a
// benchmark and reports it per operation as git-cpu-ms/op.
type gitCPU struct {
	b          *testing.B
	start, sum time.Duration
}

func (g *gitCPU) startTimer() { g.b.StartTimer(); g.start = childCPU(g.b) }
func (g *gitCPU) stopTimer()  { g.sum += childCPU(g.b) - g.start; g.b.StopTimer() }
func (g *gitCPU) report() {
	g.b.ReportMetric(float64(g.sum)/float64(time.Millisecond)/float64(g.b.N), "git-cpu-ms/op")
}

// BenchmarkMergeQueue is the queue's own cost per merged task, as in a
// batch whose tasks run in parallel: each task starts from the target's
// tip before the previous task landed, so the target has moved by one
// commit when it merges and its one-file change is replayed onto the
// new tip. Its conditions are a no-op Check; in the -edit cases Edit
// marks it done in prd.json, which adds a status, an add and a
// write-tree in the scratch work tree. Setting the task up is not
// timed. Compare BenchmarkGitRebase, on the same repository shape.
func BenchmarkMergeQueue(b *testing.B) {
	for _, bc := range []struct {
		mode Integration
		edit bool
	}{{IntegrateRebase, false}, {IntegrateMerge, false}, {IntegrateRebase, true}} {
		name := string(bc.mode)
		if bc.edit {
			name += "-edit"
		}
		b.Run(name, func(b *testing.B) {
			r := newBenchRepo(b)
			ctx := context.Background()
			tg := r.target("ralph/bench/merged")
			q := r.queue(tg, bc.mode)
			c := r.checkout(tg, "ralph/bench/task/t", false)
			r.move(tg.Ref) // a task landed before the first one timed
			started := tg.Start
			g := &gitCPU{b: b}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r.git(c.Dir, "reset", "-q", "--hard", started)
				r.git(r.dir, "update-ref", baseRef(c.Branch), started)
				r.change(c.Dir, i)
				started = r.git(r.dir, "rev-parse", tg.Ref) // where the next task starts
				id := fmt.Sprintf("T%d", i)
				m := Merge{Task: Task{ID: id, Title: "bench"}, Checkout: c, Check: green}
				if bc.edit {
					m.Edit = markDone(id)
				}
				g.startTimer()
				res, err := q.Merge(ctx, m)
				g.stopTimer()
				if err != nil || res.Outcome != Merged {
					b.Fatalf("merge %d: %+v, %v", i, res, err)
				}
			}
			g.report()
		})
	}
}

// BenchmarkGitRebase is the baseline of BenchmarkMergeQueue: a plain
// `git rebase` of a branch of one commit (a one-file change) onto a tip
// that moved by one commit, in a work tree of the same repository
// shape, with auto maintenance off as ralph's git has it. gitx runs it
// as ralph runs every git (hardened, after the look-up of the
// repository's config); exec runs the git binary directly.
func BenchmarkGitRebase(b *testing.B) {
	for _, how := range []string{"gitx", "exec"} {
		b.Run(how, func(b *testing.B) {
			r := newBenchRepo(b)
			ctx := context.Background()
			r.git(r.dir, "branch", "onto")
			task := filepath.Join(r.home, "task")
			r.git(r.dir, "worktree", "add", "-q", "-b", "task", task, "onto")
			args := []string{"-c", "maintenance.auto=false", "rebase", "-q", "onto"}
			g := &gitCPU{b: b}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r.git(task, "reset", "-q", "--hard", r.git(r.dir, "rev-parse", "onto"))
				r.change(task, i)
				r.git(task, "commit", "-q", "-am", fmt.Sprintf("task %d", i))
				r.move("refs/heads/onto")
				g.startTimer()
				var err error
				if how == "gitx" {
					_, err = gitx.Cmd{Dir: task, Args: args, Env: ralphIdentity}.Run(ctx)
				} else {
					cmd := exec.Command("git", args...)
					cmd.Dir, cmd.Env = task, append(gitx.Env(), ralphIdentity...)
					err = cmd.Run()
				}
				g.stopTimer()
				if err != nil {
					b.Fatalf("rebase %d: %v", i, err)
				}
			}
			g.report()
		})
	}
}

package gitx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree builds, once per benchmark run, a repository of 10,000
// committed files of 10 KiB (100 MB).
func benchTree(b *testing.B) *Repo {
	b.Helper()
	dir := b.TempDir()
	b.Setenv("HOME", dir)
	b.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, ".config"))
	ctx := context.Background()
	git := func(args ...string) {
		if _, err := (Cmd{Dir: dir, Args: args, Env: identity}).Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	buf := make([]byte, 10<<10)
	for i := 0; i < 10000; i++ {
		for j := range buf {
			buf[j] = byte('a' + (i+j)%26)
		}
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git("add", ".")
	git("commit", "-q", "-m", "tree")
	r, err := Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// change rewrites 10 files, as an iteration of an agent might.
func change(b *testing.B, r *Repo, n int) {
	for k := 0; k < 10; k++ {
		p := filepath.Join(r.Top, fmt.Sprintf("d%02d", k), fmt.Sprintf("f%05d.txt", k*100+k))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("iteration %d file %d\n", n, k)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint is one checkpoint of a 10k-file, 100 MB work tree
// with 10 changed files, its index kept between iterations; stash-create
// is git's own `git stash create` on the same tree, in the same run.
func BenchmarkCheckpoint(b *testing.B) {
	r := benchTree(b)
	ctx := context.Background()
	b.Run("ralph", func(b *testing.B) {
		c, err := NewCheckpointer(r, "bench", r.Top)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Checkpoint(ctx, 0); err != nil { // the index is warm from here on
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 1; i <= b.N; i++ {
			change(b, r, i)
			if _, err := c.Checkpoint(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stash-create", func(b *testing.B) {
		for i := 1; i <= b.N; i++ {
			change(b, r, -i)
			if _, err := Run(ctx, r.Top, "stash", "create"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

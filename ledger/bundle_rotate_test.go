package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// linesOf collects BundleLines from fromSeq as text, one line each.
func linesOf(t *testing.T, s *Store, fromSeq uint64) ([]string, uint64) {
	t.Helper()
	var out []string
	last, err := s.BundleLines(context.Background(), fromSeq, func(line []byte, kind string, seq uint64) error {
		if !strings.HasPrefix(string(line), kind+" ") {
			t.Fatalf("line %.20q is given as kind %q", line, kind)
		}
		out = append(out, string(line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, last
}

// appendConcurrently appends n actions from n goroutines, so that commits
// hold several actions each.
func appendConcurrently(t *testing.T, s *Store, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		wg.Go(func() {
			if _, err := s.Append(context.Background(), sample(i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestBundleLinesFollowExport: BundleLines called after each burst of
// commits, from one past what it returned, yields exactly the lines of
// ExportBundle between the key line and the end line.
func TestBundleLinesFollowExport(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	if got, last := linesOf(t, s, 1); len(got) != 0 || last != 0 {
		t.Fatalf("an empty store gives %d lines, last %d", len(got), last)
	}
	var got []string
	next := uint64(1)
	for burst := range 6 {
		appendConcurrently(t, s, burst*20, 20)
		lines, last := linesOf(t, s, next)
		if last != s.Head().Seq {
			t.Fatalf("burst %d: last %d, head %d", burst, last, s.Head().Seq)
		}
		got = append(got, lines...)
		next = last + 1
		if again, l := linesOf(t, s, next); len(again) != 0 || l != last {
			t.Fatalf("nothing new gives %d lines, last %d", len(again), l)
		}
	}
	export := strings.Split(strings.TrimSuffix(bundleOf(t, s), "\n"), "\n")
	want := export[2 : len(export)-1]
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("BundleLines gave %d lines, ExportBundle %d; they differ", len(got), len(want))
	}
	if len(want) >= 2*120 {
		t.Fatalf("%d lines for 120 actions: the commits were not shared", len(want))
	}
	if _, err := s.BundleLines(context.Background(), 1, func([]byte, string, uint64) error { return errors.New("stop") }); err == nil || err.Error() != "stop" {
		t.Fatalf("fn's error is not returned: %v", err)
	}
}

// rotatedBundle makes the bundle of a run that moved: store a's actions,
// then store b (a's bundle imported, then more actions) signing from there.
func rotatedBundle(t *testing.T) (bundle string, a, b *Store) {
	t.Helper()
	ctx := context.Background()
	a = newMemStore(t)
	appendN(t, a, 0, 6)
	b = newMemStore(t)
	if _, _, err := b.ImportBundle(ctx, strings.NewReader(bundleOf(t, a)), []string{a.VerifierKeyString()}); err != nil {
		t.Fatal(err)
	}
	appendConcurrently(t, b, 6, 9)
	var out bytes.Buffer
	w := NewBundleWriter(&out)
	w.Line([]byte("key " + a.VerifierKeyString()))
	la, last := linesOf(t, a, 1)
	for _, l := range la {
		w.Line([]byte(l))
	}
	w.Line([]byte("key " + b.VerifierKeyString()))
	lb, _ := linesOf(t, b, last+1)
	for _, l := range lb {
		w.Line([]byte(l))
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	if w.Actions() != 15 {
		t.Fatalf("the writer counted %d actions", w.Actions())
	}
	export := strings.Split(strings.TrimSuffix(bundleOf(t, b), "\n"), "\n")
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if got[len(got)-1] != export[len(export)-1] {
		t.Fatalf("computed end line %q, the store's %q", got[len(got)-1], export[len(export)-1])
	}
	return out.String(), a, b
}

// TestBundleKeyRotation: each checkpoint is verified with the key in
// force; pins must cover every key line; an import keeps every hash.
func TestBundleKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bundle, a, b := rotatedBundle(t)
	ka, kb := a.VerifierKeyString(), b.VerifierKeyString()
	rep, err := ReadBundle(ctx, strings.NewReader(bundle), nil, nil)
	if err != nil || rep.Actions != 15 || rep.Key != ka || len(rep.Keys) != 2 || rep.Keys[1] != kb || rep.Pinned {
		t.Fatalf("rotated bundle: %+v %v", rep, err)
	}
	if rep, err := ReadBundle(ctx, strings.NewReader(bundle), []string{kb, ka}, nil); err != nil || !rep.Pinned || rep.Head != b.Head() {
		t.Fatalf("both keys pinned: %+v %v", rep, err)
	}
	d := newMemStore(t)
	if _, _, err := d.ImportBundle(ctx, strings.NewReader(bundle), []string{ka, kb}); err != nil {
		t.Fatal(err)
	}
	want, got := storeActionHashes(t, b), storeActionHashes(t, d)
	if len(got) != 15 || d.Head() != b.Head() {
		t.Fatalf("imported %d actions, head %v, want %v", len(got), d.Head(), b.Head())
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("action %d: hash %s became %s", i+1, want[i], got[i])
		}
	}
	lines := strings.Split(bundle, "\n")
	keyB := -1
	for i, l := range lines {
		if l == "key "+kb {
			keyB = i
		}
	}
	other := newMemStore(t)
	for name, tc := range map[string]struct {
		bundle string
		pinned []string
		want   string
	}{
		"second key not pinned": {bundle, []string{ka}, "the checkpoints after this line are signed by key " + kb + ", not by the pinned key " + ka},
		"first key not pinned":  {bundle, []string{kb, other.VerifierKeyString()}, "bundle line 2: the bundle's checkpoints are signed by key " + ka + ", not by any of the pinned keys"},
		"key line dropped":      {strings.Replace(bundle, "key "+kb+"\n", "", 1), nil, "does not verify with key " + ka},
		"key line swapped":      {strings.Replace(bundle, "key "+kb+"\n", "key "+other.VerifierKeyString()+"\n", 1), nil, "does not verify with key " + other.VerifierKeyString()},
		"bad key line":          {strings.Replace(bundle, "key "+kb+"\n", "key nonsense\n", 1), nil, "is not a signed-note verifier key"},
	} {
		_, err := ReadBundle(ctx, strings.NewReader(tc.bundle), tc.pinned, nil)
		var be *BundleError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if name == "second key not pinned" && be != nil && be.Line != keyB+1 {
			t.Errorf("%s: named line %d, the key line is %d", name, be.Line, keyB+1)
		}
	}
}

// TestRotatedBundleCheckedWithoutGo: the Python checker follows key lines
// and takes pins.
func TestRotatedBundleCheckedWithoutGo(t *testing.T) {
	t.Parallel()
	py := testenv.Tool(t, "python3")
	bundle, a, b := rotatedBundle(t)
	path := filepath.Join(t.TempDir(), "rotated.bundle")
	if err := os.WriteFile(path, []byte(bundle), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(args ...string) (string, error) {
		out, err := exec.Command(py, append([]string{filepath.Join("testdata", "check_bundle.py"), path}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	want := fmt.Sprintf("ok 15 actions, %d checkpoints verified, root %s", strings.Count(bundle, "\nc "), b.mustRoot(t))
	if out, err := check(); err != nil || out != want {
		t.Fatalf("python: %q %v, want %q", out, err, want)
	}
	if out, err := check(a.VerifierKeyString(), b.VerifierKeyString()); err != nil || out != want {
		t.Fatalf("python with both keys pinned: %q %v", out, err)
	}
	if out, err := check(a.VerifierKeyString()); err == nil || !strings.Contains(out, "signed by key "+b.VerifierKeyString()+", not by a pinned key") {
		t.Fatalf("python accepted an unpinned second key: %q %v", out, err)
	}
	other := newMemStore(t)
	swapped := strings.Replace(bundle, "key "+b.VerifierKeyString(), "key "+other.VerifierKeyString(), 1)
	if err := os.WriteFile(path, []byte(swapped), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := check(); err == nil || !strings.Contains(out, "is not signed by "+other.VerifierKeyString()) {
		t.Fatalf("python accepted checkpoints under the wrong key: %q %v", out, err)
	}
}

// FuzzReadBundle: any text, key lines anywhere, pins or none: ReadBundle
// verifies it or names a line, and never panics.
func FuzzReadBundle(f *testing.F) {
	vectors, err := os.ReadFile(filepath.Join("testdata", "vectors.bundle"))
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.Split(string(vectors), "\n")
	// Short seeds: the first three actions and their checkpoint, then a
	// key line again (rotation to the same key).
	f.Add(strings.Join(lines[:6], "\n")+"\nend 3 00 00\n", false)
	f.Add(strings.Join(append(lines[:6:6], lines[1], "end 3 00 00"), "\n"), true)
	f.Add("ralph-bundle 1\nkey x\nkey y\nend 0 00 00\n", false)
	pin := strings.TrimPrefix(lines[1], "key ")
	f.Fuzz(func(t *testing.T, bundle string, pinned bool) {
		var pins []string
		if pinned {
			pins = []string{pin}
		}
		rep, err := ReadBundle(context.Background(), strings.NewReader(bundle), pins, nil)
		var be *BundleError
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("an error that names no line: %v", err)
		}
		if err == nil && (len(rep.Keys) == 0 || rep.Key != rep.Keys[0]) {
			t.Fatalf("a verified bundle reports keys %q and %q", rep.Key, rep.Keys)
		}
	})
}

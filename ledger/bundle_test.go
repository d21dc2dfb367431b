package ledger

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/rtfs"
)

func bundleOf(t *testing.T, s *Store) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.ExportBundle(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestBundleRoundTripKeepsEveryHash: export → import into a new store
// keeps every seq, action hash and chain hash, including values the JSON
// form cannot carry (a string ":x", a symbol, a list).
func TestBundleRoundTripKeepsEveryHash(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	for i := range 80 {
		a := sample(i)
		a.Arguments = append(a.Arguments, rtfs.String(":x"), rtfs.Symbol("sym"), rtfs.List([]rtfs.Value{rtfs.Int(1)}))
		if _, err := s.Append(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	bundle := bundleOf(t, s)
	if rep, err := ReadBundle(ctx, strings.NewReader(bundle), []string{s.VerifierKeyString()}, nil); err != nil || rep.Actions != 80 || rep.Checkpoints != 80 || !rep.Pinned {
		t.Fatalf("read bundle: %+v %v", rep, err)
	}
	d := newMemStore(t)
	rep, brep, err := d.ImportBundle(ctx, strings.NewReader(bundle), []string{s.VerifierKeyString()})
	if err != nil || rep.Actions != 80 || brep.Head != s.Head() {
		t.Fatalf("import: %+v %+v %v", rep, brep, err)
	}
	want, got := storeActionHashes(t, s), storeActionHashes(t, d)
	if len(got) != 80 {
		t.Fatalf("%d actions imported", len(got))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("action %d: hash %s became %s", i+1, want[i], got[i])
		}
	}
	if d.Head() != s.Head() {
		t.Fatalf("head %v, want %v", d.Head(), s.Head())
	}
	a, err := d.GetSeq(5)
	if err != nil || rtfs.Print(a.Arguments[1]) != `":x"` {
		t.Fatalf("the string \":x\" came back as %v (%v)", a.Arguments[1], err)
	}
	mustVerify(t, d)
	if _, _, err := d.ImportBundle(ctx, strings.NewReader(bundle), nil); err == nil || !strings.Contains(err.Error(), "already holds 80 actions") {
		t.Fatalf("a bundle into a non-empty store: %v", err)
	}
}

// TestBundleNamesTampering: each change to a bundle is named by line.
func TestBundleNamesTampering(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	appendN(t, s, 0, 5)
	bundle := bundleOf(t, s)
	lines := strings.Split(bundle, "\n")
	other := newMemStore(t)
	appendN(t, other, 0, 1)
	enc, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[4], "a "))
	enc[len(enc)-20] ^= 1
	for name, tc := range map[string]struct {
		bundle string
		pinned []string
		want   string
	}{
		"edited action":      {strings.Replace(bundle, lines[4], "a "+base64.StdEncoding.EncodeToString(enc), 1), nil, "bundle line 6: checkpoint 2 signs Merkle root"},
		"cut short":          {strings.Join(lines[:8], "\n") + "\n", nil, `bundle line 9: the bundle ends without its "end" line: it was cut short`},
		"other key":          {bundle, []string{other.VerifierKeyString()}, "bundle line 2: the bundle's checkpoints are signed by key " + s.VerifierKeyString() + ", not by the pinned key " + other.VerifierKeyString()},
		"dropped checkpoint": {strings.Replace(bundle, lines[len(lines)-3]+"\n", "", 1), nil, "actions 5–5 are covered by no checkpoint"},
	} {
		_, err := ReadBundle(context.Background(), strings.NewReader(tc.bundle), tc.pinned, nil)
		var be *BundleError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestBundleCheckedWithoutGo runs testdata/check_bundle.py, a verifier
// written from docs/ledger.md in Python with the standard library only:
// it checks the checkpoints' signed-note signatures and Merkle roots of the
// golden bundle and of a store's bundle, and refuses a tampered one.
func TestBundleCheckedWithoutGo(t *testing.T) {
	t.Parallel()
	py := testenv.Tool(t, "python3")
	s := newMemStore(t)
	appendN(t, s, 0, 40)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.bundle")
	bundle := bundleOf(t, s)
	if err := os.WriteFile(good, []byte(bundle), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join("testdata", "vectors.bundle"), good} {
		out, err := exec.Command(py, filepath.Join("testdata", "check_bundle.py"), path).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Fatalf("python check of %s: %v\n%s", path, err, out)
		}
	}
	out, _ := exec.Command(py, filepath.Join("testdata", "check_bundle.py"), good).CombinedOutput()
	if want := "ok 40 actions, 40 checkpoints verified, root " + s.mustRoot(t).String(); strings.TrimSpace(string(out)) != want {
		t.Fatalf("python: %q, want %q", out, want)
	}
	lines := strings.Split(bundle, "\n")
	cp, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[len(lines)-3], "c "))
	forged := bytes.Replace(cp, []byte("\n40\n"), []byte("\n39\n"), 1)
	bad := filepath.Join(dir, "bad.bundle")
	lines[len(lines)-3] = "c " + base64.StdEncoding.EncodeToString(forged)
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, filepath.Join("testdata", "check_bundle.py"), bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "checkpoint 39: the Ed25519 signature does not verify") {
		t.Fatalf("python accepted a forged checkpoint: %v %s", err, out)
	}
}

func (s *Store) mustRoot(t *testing.T) Hash {
	t.Helper()
	cp, err := s.LatestCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	return cp.Root
}

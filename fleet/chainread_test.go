package fleet

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
)

// parseFuzzMsgs reads messages, one per line: stream seq|msg id|Ralph-Seq|Ralph-From|data.
func parseFuzzMsgs(in string) []chainMsg {
	var out []chainMsg
	for _, l := range strings.Split(in, "\n") {
		f := strings.SplitN(l, "|", 5)
		if len(f) != 5 {
			continue
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		out = append(out, chainMsg{streamSeq: n, msgID: f[1], seq: f[2], from: f[3], data: []byte(f[4])})
	}
	return out
}

// FuzzSegmenter: whatever the messages, the segment reader returns an
// error or a bundle, never panics, and what it renders is read (and
// refused or verified) by ReadBundle without a panic.
func FuzzSegmenter(f *testing.F) {
	f.Add("1|r/s1/key/1|1|1|key ralph/s1+00000000+AQ\n2|r/s1/a/1|1||a AQAAAAAAAAAB\n3|r/s1/c/1|1||c eA==\n4|r/s2/key/2|2|2|key x\n5|r/s2/end/1|1||end 1 00 00")
	f.Add("1|r/s1/key/1|1|1|key k\n2|r/s1/a/1|1||a AA==\n3|r/s1/a/2|2||a AA==\n4|r/s2/key/1|1|1|key j\n5|r/s2/a/1|1||a AA==\n6|r/s2/c/1|1||c AA")
	f.Add("1|r/s1/a/1|1||a AA==\n2|r/s1/key/0|0|0|key k\n3|r//c1/0|0||c1 \n4|r/s1/end/x|x||end")
	f.Fuzz(func(t *testing.T, in string) {
		var info ChainInfo
		var out bytes.Buffer
		seg := newSegmenter("r", &out, &info)
		var err error
		for _, m := range parseFuzzMsgs(in) {
			if err = seg.add(m); err != nil {
				break
			}
		}
		if err == nil {
			err = seg.finish()
		}
		if err != nil {
			if !strings.Contains(err.Error(), "run r") {
				t.Fatalf("the error does not name the run: %v", err)
			}
			return
		}
		_, rerr := ledger.ReadBundle(context.Background(), &out, nil, nil)
		if rerr != nil {
			_ = info.nameLine("r", rerr).Error()
		}
	})
}

// TestSegmentRule: a key line drops the uncovered tail before it, and
// only that; a message that does not fit (a segment that skips or repeats
// actions, garbage, anything after the end line) is skipped and noted,
// and the chain around it is read as if it were not there.
func TestSegmentRule(t *testing.T) {
	t.Parallel()
	base := "1|r/s1/key/1|1|1|key k1\n2|r/s1/a/1|1||a AA==\n3|r/s1/c/1|1||c AA\n4|r/s1/a/2|2||a AA==\n5|r/s1/a/3|3||a AA==\n"
	for name, tc := range map[string]struct {
		msgs    string
		note    string // the first skip's note, when one is skipped
		dropped uint64
		keys    int
		actions uint64
		ended   bool
	}{
		"tail dropped":   {base + "6|r/s2/key/2|2|2|key k2\n7|r/s2/a/2|2||a AA==\n8|r/s2/c/2|2||c AA", "", 2, 2, 2, false},
		"live tail":      {base, "", 2, 1, 1, false},
		"gap":            {base + "6|r/s2/key/3|3|3|key k2", "key line of the segment from action 3 in the stream of run r (message 6", 2, 1, 1, false},
		"overlap":        {base + "6|r/s2/key/1|1|1|key k2", "must start at action 2", 2, 1, 1, false},
		"stale store":    {base + "6|r/s2/key/2|2|2|key k2\n7|r/s1/a/4|4||a AA==\n8|r/s2/a/2|2||a AA==\n9|r/s2/c/2|2||c AA", "comes from store s1", 2, 2, 2, false},
		"after end":      {"1|r/s1/key/1|1|1|key k1\n2|r/s1/end/0|0||end 0 a b\n3|r/s1/a/1|1||a AA==\n4|r/s2/key/1|1|1|key k2", "follows the chain's end line", 0, 1, 0, true},
		"no key first":   {"1|r/s1/a/1|1||a AA==\n2|r/s1/key/1|1|1|key k1", "does not begin with a key line", 0, 1, 0, false},
		"other run's id": {"1|q/s1/key/1|1|1|key k1\n2|r/s1/key/1|1|1|key k1", "is not r/<store id>/key/1", 0, 1, 0, false},
		"garbage":        {"1|r/s1/key/1|1|1|key k1\n2|r/s1/a/1|1||a AA==\n3|||||{\"forged\":true}\n4|r/s1/c/1|1||c AA", "a message in the stream of run r (message 3 of stream RALPH_CHAINS): it is not a chain line", 0, 1, 1, false},
	} {
		var info ChainInfo
		seg := newSegmenter("r", &bytes.Buffer{}, &info)
		var err error
		for _, m := range parseFuzzMsgs(tc.msgs) {
			if err = seg.add(m); err != nil {
				break
			}
		}
		if err == nil {
			err = seg.finish()
		}
		skipped := uint64(0)
		if tc.note != "" {
			skipped = 1
		}
		if name == "after end" { // an a line and a key line follow the end
			skipped = 2
		}
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case info.Skipped != skipped || tc.note != "" && !strings.Contains(info.SkipNotes[0], tc.note):
			t.Errorf("%s: skipped %d %q, want %d %q", name, info.Skipped, info.SkipNotes, skipped, tc.note)
		case info.Dropped != tc.dropped || len(info.Keys) != tc.keys || info.Actions != tc.actions || info.Ended != tc.ended:
			t.Errorf("%s: %+v", name, info)
		}
	}
}

// TestSegmentSkipsBounded: a flood of garbage is counted, and only the
// first few notes are kept.
func TestSegmentSkipsBounded(t *testing.T) {
	t.Parallel()
	var info ChainInfo
	seg := newSegmenter("r", &bytes.Buffer{}, &info)
	if err := seg.add(chainMsg{streamSeq: 1, msgID: "r/s1/key/1", seq: "1", from: "1", data: []byte("key k1")}); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := seg.add(chainMsg{streamSeq: uint64(i + 2), data: []byte("garbage")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := seg.finish(); err != nil || info.Skipped != 1000 || len(info.SkipNotes) != maxSkipNotes {
		t.Fatalf("%v: skipped %d, %d notes", err, info.Skipped, len(info.SkipNotes))
	}
}

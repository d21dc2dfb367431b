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
// only that; a segment that skips or repeats actions is refused.
func TestSegmentRule(t *testing.T) {
	t.Parallel()
	base := "1|r/s1/key/1|1|1|key k1\n2|r/s1/a/1|1||a AA==\n3|r/s1/c/1|1||c AA\n4|r/s1/a/2|2||a AA==\n5|r/s1/a/3|3||a AA==\n"
	for name, tc := range map[string]struct {
		msgs    string
		want    string // error, or "" and then dropped/actions/keys
		dropped uint64
		keys    int
	}{
		"tail dropped":   {base + "6|r/s2/key/2|2|2|key k2\n7|r/s2/a/2|2||a AA==\n8|r/s2/c/2|2||c AA", "", 2, 2},
		"live tail":      {base, "", 2, 1},
		"gap":            {base + "6|r/s2/key/3|3|3|key k2", "key line of the segment from action 3 in the stream of run r (message 6", 0, 0},
		"overlap":        {base + "6|r/s2/key/1|1|1|key k2", "must start at action 2", 0, 0},
		"stale store":    {base + "6|r/s2/key/2|2|2|key k2\n7|r/s1/a/4|4||a AA==", "comes from store s1", 0, 0},
		"after end":      {"1|r/s1/key/1|1|1|key k1\n2|r/s1/end/0|0||end 0 a b\n3|r/s1/a/1|1||a AA==", "follows the chain's end line", 0, 0},
		"no key first":   {"1|r/s1/a/1|1||a AA==", "does not begin with a key line", 0, 0},
		"other run's id": {"1|q/s1/key/1|1|1|key k1", "is not r/<store id>/key/1", 0, 0},
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
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		case tc.want == "" && (err != nil || info.Dropped != tc.dropped || len(info.Keys) != tc.keys):
			t.Errorf("%s: %v, %+v", name, err, info)
		}
	}
}

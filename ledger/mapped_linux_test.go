//go:build linux

package ledger

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// mappedRSS sums the resident kilobytes of this process's mappings of
// files under dir.
func mappedRSS(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		testenv.Need(t, "/proc/self/smaps", err)
	}
	defer f.Close()
	total, inStore := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			inStore = len(fields) >= 6 && strings.HasPrefix(fields[5], dir+"/")
		case inStore && len(fields) >= 2 && fields[0] == "Rss:":
			n, _ := strconv.Atoi(fields[1])
			total += n
		}
	}
	return total
}

func TestReleaseMappedDropsTheScansPages(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, false)
	appendN(t, s, 0, 3000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir, false) // the actions now live in mapped tables
	mustVerify(t, s)           // a full read touches their pages
	before := mappedRSS(t, s.dir)
	if before == 0 {
		t.Skip("the store's files are not mapped here")
	}
	if err := s.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	if after := mappedRSS(t, s.dir); after >= before {
		t.Errorf("mapped store pages resident: %d kB before, %d kB after ReleaseMapped", before, after)
	}
	if r := mustVerify(t, s); r.Actions != 3000 { // nothing is lost: pages fault back in
		t.Errorf("verified %d actions after the release, want 3000", r.Actions)
	}
}

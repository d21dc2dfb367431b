package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func TestSinkLandsOnTheCallsInFlight(t *testing.T) {
	s := NewSink()
	evil := HostDenial("evil.example", 443)
	s.Deny(evil) // no call in flight: loose
	var mu sync.Mutex
	var shown []Denial
	a := s.Open(func(d Denial) { mu.Lock(); shown = append(shown, d); mu.Unlock() })
	b := s.Open(nil)
	other := HostDenial("other.example", 80)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ { // the proxy's goroutines refuse at once
		wg.Add(1)
		go func() { defer wg.Done(); s.Deny(other) }()
	}
	wg.Wait()
	a.Add(PathDenial(OpRead, "/root/.ssh/id_ed25519"))
	got, dropped := a.Close()
	if want := []Denial{other, PathDenial(OpRead, "/root/.ssh/id_ed25519")}; !slices.Equal(got, want) || dropped != 0 {
		t.Fatalf("call a got %v (+%d), want %v", got, dropped, want)
	}
	if !slices.Equal(shown, got) {
		t.Fatalf("call a showed %v, want each refusal once: %v", shown, got)
	}
	s.Deny(evil) // a is closed: only b takes it
	a.Add(evil)
	if got, _ := b.Close(); !slices.Equal(got, []Denial{other, evil}) {
		t.Fatalf("call b got %v", got)
	}
	if loose, _ := s.TakeLoose(); !slices.Equal(loose, []Denial{evil}) {
		t.Fatalf("loose = %v, want the refusal that came before any call", loose)
	}
	if loose, _ := s.TakeLoose(); len(loose) != 0 {
		t.Fatalf("TakeLoose gave %v twice", loose)
	}
}

func TestRefusalsAreBounded(t *testing.T) {
	r := NewSink().Open(nil)
	for i := 0; i < MaxRefusals+5; i++ {
		r.Add(HostDenial(fmt.Sprintf("h%d.example", i), 443))
		r.Add(HostDenial(fmt.Sprintf("h%d.example", i), 443))
	}
	got, dropped := r.Close()
	if len(got) != MaxRefusals || dropped != 10 { // the repeats of one left out are not told apart
		t.Fatalf("kept %d, dropped %d; want %d and 10", len(got), dropped, MaxRefusals)
	}
}

func TestNilSinkAndRefusalsTakeNothing(t *testing.T) {
	var s *Sink
	s.Deny(HostDenial("x", 1))
	r := s.Open(nil)
	r.Add(HostDenial("x", 1))
	if got, n := r.Close(); got != nil || n != 0 {
		t.Fatalf("nil refusals gave %v", got)
	}
	if RefusalsFrom(context.Background()) != nil {
		t.Fatal("a context with no refusals gave some")
	}
	real := NewSink().Open(nil)
	if RefusalsFrom(WithRefusals(context.Background(), real)) != real {
		t.Fatal("WithRefusals did not carry them")
	}
}

func TestDenialAllowLines(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		d          Denial
		what, line string
	}{
		{PathDenial(OpRead, "/root/.aws/credentials"), "read /root/.aws/credentials", `read = ["/root/.aws/credentials"]`},
		{PathDenial(OpWrite, filepath.Join(dir, "new", "deeper", "f.txt")), "write " + filepath.Join(dir, "new", "deeper", "f.txt"), `write = ["` + dir + `"]`},
		{PathDenial(OpWrite, dir), "write " + dir, `write = ["` + dir + `"]`},
		{HostDenial("evil.example", 443), "connect evil.example:443", `hosts = ["evil.example"]`},
	} {
		if c.d.What != c.what || c.d.Allow != c.line {
			t.Errorf("got {%q, %q}, want {%q, %q}", c.d.What, c.d.Allow, c.what, c.line)
		}
	}
}

package urlfrontier_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sievecrawl/sieve/urlfrontier"
)

// syncBuffer is a bytes.Buffer safe for a logger's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestLoadReportsProgress: while a server's index catches up with the
// queues' log (a server that lost its directory rebuilds from it) it logs
// how far it is, rather than seeming hung, in the log and to
// Options.Progress (serve's page shows it); serve gives it no fixed
// deadline.
func TestLoadReportsProgress(t *testing.T) {
	e := newEnv(t)
	var log, status syncBuffer
	n := e.start("a", func(o *urlfrontier.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		o.Progress = func(m string) { fmt.Fprintln(&status, m) }
	})
	n.put(t, disc("c1", "https://a.example/1", ""), disc("c1", "https://a.example/2", ""))
	stop := urlfrontier.ReportLoad(n.srv, t.Context(), 10*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "catching up with the queues' log") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress logged:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	line := log.String()
	if !strings.Contains(line, " entries=") || !strings.Contains(line, " at=") {
		t.Errorf("progress line lacks the counts:\n%s", line)
	}
	if strings.Contains(line, " at=0 ") {
		t.Errorf("progress line is at entry 0 of a log that holds the 2 URLs:\n%s", line)
	}
	if st := status.String(); !strings.Contains(st, "catching up with the queues' log: ") || !strings.Contains(st, " entries read, at entry ") {
		t.Errorf("Progress was told %q, want the catch-up with its counts", st)
	}
}

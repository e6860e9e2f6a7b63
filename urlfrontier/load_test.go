package urlfrontier_test

import (
	"bytes"
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

// TestLoadReportsProgress: while a server loads its queues it logs how many
// values it has of how many, rather than seeming hung (a server with
// millions of queued URLs takes tens of seconds; serve no longer gives
// it a fixed deadline).
func TestLoadReportsProgress(t *testing.T) {
	e := newEnv(t)
	var log syncBuffer
	n := e.start("a", func(o *urlfrontier.Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	n.put(t, disc("c1", "https://a.example/1", ""), disc("c1", "https://a.example/2", ""))
	stop := urlfrontier.ReportLoad(n.srv, t.Context(), 10*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "loading the queues") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress logged:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	line := log.String()
	if !strings.Contains(line, "bucket=SIEVE_UF_QUEUES") || !strings.Contains(line, " of=") || !strings.Contains(line, "values=") {
		t.Errorf("progress line lacks the bucket or the counts:\n%s", line)
	}
	if strings.Contains(line, " of=0 ") {
		t.Errorf("progress line counts no value in the bucket, which holds the 2 URLs:\n%s", line)
	}
}

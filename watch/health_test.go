package watch

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sievecrawl/sieve/stats"
)

// TestClientHealth: Health answers nil while the server is ready, names the
// checks that fail while it is not (503 from /readyz), and with live asks
// only /healthz, which a process not ready still answers.
func TestClientHealth(t *testing.T) {
	var natsDown atomic.Bool
	s, err := New(Sources{Role: "dedup-worker", Counters: stats.NewMemory(), Checks: map[string]func() error{
		"nats": func() error {
			if natsDown.Load() {
				return errors.New("no server answers")
			}
			return nil
		},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var c Client
	for _, tc := range []struct {
		name       string
		down, live bool
		want       string // in the error; "" for none
	}{
		{"ready", false, false, ""},
		{"not ready", true, false, "not ready: nats: no server answers"},
		{"alive though not ready", true, true, ""},
	} {
		natsDown.Store(tc.down)
		err := c.Health(t.Context(), s.URL(), tc.live)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Health = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := c.Health(t.Context(), "http://127.0.0.1:1/", false); err == nil {
		t.Error("Health of a port nobody serves = nil")
	}
}

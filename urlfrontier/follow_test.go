package urlfrontier

import (
	"testing"
	"time"
)

// TestPeers pins how a server decides it shares the buckets: another
// instance heard within the TTL, itself never, a delete at once.
func TestPeers(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type event struct {
		key  string
		at   time.Duration
		gone bool
	}
	tests := []struct {
		name     string
		events   []event
		at       time.Duration
		shared   bool
		appeared bool
	}{
		{"alone", nil, 0, false, false},
		{"only itself", []event{{"server.me", 0, false}}, 0, false, false},
		{"another, heard now", []event{{"server.b", 0, false}}, time.Second, true, true},
		{"another, heard within the TTL", []event{{"server.b", 0, false}, {"server.b", 10 * time.Second, false}}, 24 * time.Second, true, true},
		{"another, silent past the TTL", []event{{"server.b", 0, false}}, nodeTTL + time.Second, false, true},
		{"another, deleted", []event{{"server.b", 0, false}, {"server.b", time.Second, true}}, time.Second, false, true},
		{"a delete of one never heard", []event{{"server.b", 0, true}}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPeers("server.me")
			for _, e := range tt.events {
				p.heard(e.key, t0.Add(e.at), e.gone)
			}
			if got := p.shared(t0.Add(tt.at), nodeTTL); got != tt.shared {
				t.Errorf("shared = %v, want %v", got, tt.shared)
			}
			got := false
			select {
			case <-p.appeared:
				got = true
			default:
			}
			if got != tt.appeared {
				t.Errorf("appeared signalled = %v, want %v", got, tt.appeared)
			}
		})
	}
}

package frontier

import (
	"strings"
	"testing"
)

func TestAtLeastVersion(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"2.10.0", true},
		{"2.10.22", true},
		{"2.11.0-RC.1", true}, // a pre-release of a later minor
		{"3.0.0", true},
		{"2.9.10", false}, // Debian 12's nats-server
		{"2.9.25", false},
		{"1.4.1", false},
		{"2.10", false}, // not major.minor.patch
		{"", false},     // not connected
		{"v2.10.0", false},
	}
	for _, tt := range tests {
		if got := atLeast(tt.v, MinServerVersion); got != tt.want {
			t.Errorf("atLeast(%q, %q) = %v, want %v", tt.v, MinServerVersion, got, tt.want)
		}
	}
}

// TestReplicasWarning pins which servers a replicated deployment is warned
// of: those before the fix of a restarted node deleting its replicas as
// orphans (issue 39, item 1).
func TestReplicasWarning(t *testing.T) {
	for _, tt := range []struct {
		version  string
		replicas int
		warn     bool
	}{
		{"2.11.17", 3, true}, // what compose shipped
		{"2.10.22", 3, true},
		{"2.12.4", 3, true},
		{"2.12.5", 3, false}, // #7540 and #7824 on the 2.12 line
		{"2.14.0", 3, false},
		{"2.15.2", 3, false},  // go.mod's
		{"2.11.17", 1, false}, // nothing replicated
		{"", 3, false},        // not connected: CheckServer says so
	} {
		got := replicasWarning(tt.version, "nats://n1:4222", tt.replicas)
		if (got != "") != tt.warn {
			t.Errorf("replicasWarning(%q, %d) = %q, want a warning %v", tt.version, tt.replicas, got, tt.warn)
		}
		if got != "" && (!strings.Contains(got, tt.version) || !strings.Contains(got, "nats-server#5382") || !strings.Contains(got, RestartSafeVersion)) {
			t.Errorf("replicasWarning(%q) = %q: want the version, the upstream issue and the fixed version", tt.version, got)
		}
	}
}

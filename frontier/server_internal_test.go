package frontier

import "testing"

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

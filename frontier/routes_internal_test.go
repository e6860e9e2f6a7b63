package frontier

import (
	"fmt"
	"testing"
)

// TestWantedOwnerSpreadsAndMovesOnlyAShare pins the rendezvous hashing of
// route leases: every member gets a share, and a member leaving moves only
// the routes it was given.
func TestWantedOwnerSpreadsAndMovesOnlyAShare(t *testing.T) {
	tests := []struct {
		members []string
		routes  int
	}{
		{[]string{"w1", "w2", "w3"}, 16},
		{[]string{"w-0123", "w-0124", "w-0125", "w-0126"}, 32},
		{[]string{"dedup-worker-1", "dedup-worker-2"}, 8},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.members), func(t *testing.T) {
			share := map[string]int{}
			owner := map[int]string{}
			for r := 0; r < tt.routes; r++ {
				owner[r] = wantedOwner(tt.members, r)
				share[owner[r]]++
			}
			for _, m := range tt.members {
				if share[m] == 0 {
					t.Errorf("member %s wanted for no route of %d: %v", m, tt.routes, share)
				}
			}
			gone := tt.members[0]
			for r := 0; r < tt.routes; r++ {
				if now := wantedOwner(tt.members[1:], r); owner[r] != gone && now != owner[r] {
					t.Errorf("route %d moved from %s to %s when %s left", r, owner[r], now, gone)
				}
			}
		})
	}
}

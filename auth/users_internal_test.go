package auth

import (
	"fmt"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestUsersFloodKeepsGoodUsers: a flood of distinct wrong passwords, more
// than the memory holds, churns the failures only: a user let in before
// is still answered from memory (never queued behind the guesses'
// comparisons), and each guess is refused.
func TestUsersFloodKeepsGoodUsers(t *testing.T) {
	set := map[string]string{"reader": string(mustHash(t, "s3cret-pass"))}
	var u users
	if !u.check(set, "reader", "s3cret-pass") {
		t.Fatal("the good password refused")
	}
	for i := range maxCached + 500 {
		if u.check(set, "reader", fmt.Sprint("guess-", i)) {
			t.Fatalf("guess %d let in", i)
		}
	}
	if len(u.good) != 1 {
		t.Fatalf("after a flood of guesses the memory of good users holds %d, want 1", len(u.good))
	}
	if len(u.bad) > maxCached {
		t.Fatalf("the memory of failures holds %d, past %d", len(u.bad), maxCached)
	}
	set["reader"] = string(mustHash(t, "new-pass"))
	if u.check(set, "reader", "s3cret-pass") {
		t.Fatal("the old password let in from memory after the hash changed")
	}
}

func mustHash(t *testing.T, password string) []byte {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

package warc

import (
	"regexp"
	"testing"
)

// TestRecordID checks that record ids are version 4 UUID URNs (RFC 9562)
// and differ.
func TestRecordID(t *testing.T) {
	form := regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id, err := recordID()
		if err != nil {
			t.Fatal(err)
		}
		if !form.MatchString(id) {
			t.Fatalf("record id %q is not a version 4 UUID URN", id)
		}
		if seen[id] {
			t.Fatalf("record id %q twice", id)
		}
		seen[id] = true
	}
}

package urlstore_test

import (
	"testing"

	"github.com/sievecrawl/sieve/urlstore"
	"github.com/sievecrawl/sieve/urlstore/urlstoretest"
)

// TestMemLogContract runs the Log contract on the in-memory log the unit
// tests of a Store run on; frontier runs the same on the JetStream log.
func TestMemLogContract(t *testing.T) {
	urlstoretest.TestLog(t, func(*testing.T) urlstore.Log { return &urlstore.MemLog{} })
}

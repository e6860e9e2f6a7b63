package main

import "github.com/sievecrawl/sieve/dedup"

// seenFilter is what the binary needs of a dedup filter.
type seenFilter = dedup.Filter

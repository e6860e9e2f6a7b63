package main

import "github.com/sievecrawl/sieve/config"

// seenFilter is what the binary needs of a dedup filter.
type seenFilter = config.SeenFilter

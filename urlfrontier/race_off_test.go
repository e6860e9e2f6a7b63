//go:build !race

package urlfrontier_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = false

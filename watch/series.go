package watch

import (
	"sync"
	"time"
)

// maxKeys bounds the number of series kept; keys past it are not recorded.
const maxKeys = 512

// series is a fixed ring of samples: at each time, one value per key. A key
// first seen after older samples reads 0 for them (every series is a counter
// or a depth that was 0 before it was reported). It is safe for concurrent
// use.
type series struct {
	mu   sync.Mutex
	size int
	next int // ring index of the next sample
	n    int // samples held (≤ size)
	at   []int64
	vals map[string][]float64
	keys []string // in order of first appearance
}

func newSeries(size int) *series {
	return &series{size: size, at: make([]int64, size), vals: map[string][]float64{}}
}

// add records a sample at t.
func (s *series) add(t time.Time, v map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.next
	s.at[i] = t.UnixMilli()
	for _, k := range s.keys {
		s.vals[k][i] = v[k] // absent now: 0
	}
	for k, x := range v {
		if _, ok := s.vals[k]; ok || len(s.keys) >= maxKeys {
			continue
		}
		col := make([]float64, s.size)
		col[i] = x
		s.vals[k] = col
		s.keys = append(s.keys, k)
	}
	s.next = (i + 1) % s.size
	s.n = min(s.n+1, s.size)
}

// Samples is a stretch of the time series: At holds the sample times (Unix
// milliseconds), Values each key's value at those times.
type Samples struct {
	IntervalMS int64                `json:"interval_ms"`
	At         []int64              `json:"at"`
	Values     map[string][]float64 `json:"values"`
}

// after returns the samples taken after the time ms (Unix milliseconds; 0:
// all of them), oldest first.
func (s *series) after(ms int64) Samples {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Samples{At: []int64{}, Values: map[string][]float64{}}
	first := (s.next - s.n + s.size) % s.size
	var idx []int
	for j := range s.n {
		i := (first + j) % s.size
		if s.at[i] > ms {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		out.At = append(out.At, s.at[i])
	}
	for _, k := range s.keys {
		col := make([]float64, len(idx))
		for j, i := range idx {
			col[j] = s.vals[k][i]
		}
		out.Values[k] = col
	}
	return out
}

// rate is key's per-second rate over the last window of samples (0 with
// fewer than two).
func (s *series) rate(key string, window time.Duration) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	col, ok := s.vals[key]
	if !ok || s.n < 2 {
		return 0
	}
	last := (s.next - 1 + s.size) % s.size
	first := last
	for j := 1; j < s.n; j++ {
		i := (last - j + s.size) % s.size
		if s.at[last]-s.at[i] > window.Milliseconds() {
			break
		}
		first = i
	}
	dt := float64(s.at[last]-s.at[first]) / 1000
	if dt <= 0 {
		return 0
	}
	return (col[last] - col[first]) / dt
}

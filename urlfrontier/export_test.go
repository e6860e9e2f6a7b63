package urlfrontier

import (
	"context"
	"time"
)

// Watching reports whether s watches the queues bucket (follow.go).
func Watching(s *Server) bool { return s.watching.Load() }

// SetFollowCheck sets how often a watching server checks whether it is
// alone, until the test ends.
func SetFollowCheck(d time.Duration) (restore func()) {
	old := followCheck
	followCheck = d
	return func() { followCheck = old }
}

// MarkUnsure says, as a write whose outcome is unknown does, that the
// bucket may hold what the index lacks.
func MarkUnsure(s *Server) { s.store.markUnsure() }

// WatchDeliveries counts the values s's watches delivered.
func WatchDeliveries(s *Server) uint64 { return s.store.delivered.Load() }

// ReportLoad runs s's load report until the returned function is called,
// reporting every d.
func ReportLoad(s *Server, ctx context.Context, d time.Duration) (stop func()) {
	old := loadReport
	loadReport = d
	stopReport := s.reportLoad(ctx, make(chan struct{}))
	return func() { stopReport(); loadReport = old }
}

package urlfrontier

import (
	"context"
	"time"

	"github.com/sievecrawl/sieve/urlstore"
)

// ReportLoad runs s's catch-up report until the returned function is
// called, reporting every d.
func ReportLoad(s *Server, ctx context.Context, d time.Duration) (stop func()) {
	old := loadReport
	loadReport = d
	stopReport := s.reportLoad(ctx, make(chan struct{}))
	return func() { stopReport(); loadReport = old }
}

// StoreStats are the figures of s's queues' store.
func StoreStats(s *Server) urlstore.Stats { return s.q.st.Stats() }

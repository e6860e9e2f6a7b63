package pipeline

import "github.com/sievecrawl/sieve/admit"

// Filters returns the worker's crawl filters (after Open), for another
// admission core in the same process, such as the URLFrontier server's,
// to test and mark the same filters as the worker.
func (w *Worker) Filters() admit.Filters { return w.filters }

// ForgetCrawl drops the worker's open filter of a deleted crawl at once,
// as the record's deletion does when it reaches the worker's watch.
func (w *Worker) ForgetCrawl(id string) {
	if w.filters != nil {
		w.filters.forget(id)
	}
}

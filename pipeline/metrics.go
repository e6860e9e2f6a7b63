package pipeline

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// filterCollector exports the open crawl filters' health, summed, on each
// scrape.
type filterCollector struct{ f *crawlFilters }

var (
	filterItemsDesc  = prometheus.NewDesc("sieve_filter_items", "Keys the filter has admitted.", nil, nil)
	filterFPPDesc    = prometheus.NewDesc("sieve_filter_estimated_fpp", "The filter's current false-positive rate, estimated from its fill.", nil, nil)
	filterTargetDesc = prometheus.NewDesc("sieve_filter_target_fpp", "The configured bound on the filter's false-positive rate.", nil, nil)
	filterMemDesc    = prometheus.NewDesc("sieve_filter_memory_bytes", "Memory the filter's bits or slots occupy.", nil, nil)
	filterLayersDesc = prometheus.NewDesc("sieve_filter_layers", "Layers of the growing filter.", nil, nil)
	filterOpenDesc   = prometheus.NewDesc("sieve_filters_open", "Crawl filters open in this worker (the memory and items above are theirs, summed).", nil, nil)
)

func (c filterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{filterItemsDesc, filterFPPDesc, filterTargetDesc, filterMemDesc, filterLayersDesc, filterOpenDesc} {
		ch <- d
	}
}

func (c filterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ch <- prometheus.MustNewConstMetric(filterOpenDesc, prometheus.GaugeValue, float64(len(c.f.readyFilters())))
	s, err := c.f.stats(ctx)
	if err != nil {
		// Said as an error, which the surface's /metrics leaves out of the
		// scrape (and logs) while answering the rest with 200.
		ch <- prometheus.NewInvalidMetric(filterItemsDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(filterItemsDesc, prometheus.GaugeValue, float64(s.Items))
	ch <- prometheus.MustNewConstMetric(filterFPPDesc, prometheus.GaugeValue, s.EstimatedFPP)
	ch <- prometheus.MustNewConstMetric(filterTargetDesc, prometheus.GaugeValue, s.TargetFPP)
	ch <- prometheus.MustNewConstMetric(filterMemDesc, prometheus.GaugeValue, float64(s.MemoryBytes))
	ch <- prometheus.MustNewConstMetric(filterLayersDesc, prometheus.GaugeValue, float64(len(s.Layers)))
}

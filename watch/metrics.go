package watch

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the last sample's filter and queue state on each scrape,
// so a scrape costs the sources nothing. The filter's totals (items, FPP,
// bound, memory, layers) are pipeline.Worker's metrics; these add its layers
// and growth. Layers and partitions are labels
// (bounded by the filter's growth and the topology), crawls are labelled by
// id (never hosts).
type collector struct{ s *Server }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("sieve_"+name, help, labels, nil)
}

var (
	filterNextCap    = desc("filter_next_layer_capacity", "Capacity of the layer the filter opens next (0: it does not grow).")
	filterGrowth     = desc("filter_growth_remaining_items", "Items the newest layer takes before the next layer opens.")
	layerFill        = desc("filter_layer_fill", "Fraction of a layer's bits set (Bloom) or slots used (cuckoo).", "layer")
	layerFPP         = desc("filter_layer_estimated_fpp", "A layer's current false-positive rate, estimated from its fill.", "layer")
	layerItems       = desc("filter_layer_items", "Keys added to a layer.", "layer")
	layerCapacity    = desc("filter_layer_capacity", "Keys a layer was sized for.", "layer")
	queueDiscovered  = desc("queue_discovered_messages", "Discovered messages waiting for a dedup worker.")
	queueInFlight    = desc("queue_discovered_inflight", "Discovered messages fetched by dedup workers, not yet acknowledged.")
	queueRedelivered = desc("queue_redelivered_messages", "Messages redelivered and not yet acknowledged, by stream.", "stream")
	queueFrontier    = desc("queue_frontier_messages", "Admitted URLs waiting for crawlers.")
	queuePartition   = desc("queue_frontier_partition_messages", "Admitted URLs waiting for crawlers, by partition.", "partition")
	queueCrawl       = desc("queue_frontier_crawl_messages", "Admitted URLs waiting for crawlers, by crawl.", "crawl")
	seenLinks        = desc("seen_links_total", "Links the deployment's dedup workers handled, by crawl and result (admitted, duplicate, rejected), from the shared statistics.", "crawl", "result")
	sourceUp         = desc("watch_source_up", "1 if the last sample read the part (shared, filter, streams), 0 if it failed.", "part")
)

func registerMetrics(reg prometheus.Registerer, s *Server) error {
	return reg.Register(collector{s})
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{filterNextCap, filterGrowth,
		layerFill, layerFPP, layerItems, layerCapacity, queueDiscovered, queueInFlight, queueRedelivered, queueFrontier,
		queuePartition, queueCrawl, seenLinks, sourceUp} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.s.Report()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	parts := map[string]bool{}
	if c.s.src.Counters != nil {
		parts["shared"] = r.Shared != nil
	}
	if r.Shared != nil {
		for id, n := range r.Shared.Totals.Crawls {
			for _, x := range []struct {
				result string
				n      int64
			}{{"admitted", n.Admitted}, {"duplicate", n.Duplicates}, {"rejected", n.Rejected}} {
				ch <- prometheus.MustNewConstMetric(seenLinks, prometheus.CounterValue, float64(x.n), id, x.result)
			}
		}
	}
	if f := r.Filter; f != nil {
		gauge(filterNextCap, float64(f.NextLayerCapacity))
		gauge(filterGrowth, float64(r.Growth))
		for i, l := range f.Layers {
			layer := strconv.Itoa(i)
			gauge(layerFill, l.Fill, layer)
			gauge(layerFPP, l.EstimatedFPP, layer)
			gauge(layerItems, float64(l.Items), layer)
			gauge(layerCapacity, float64(l.Capacity), layer)
		}
	}
	if c.s.src.Filter != nil {
		parts["filter"] = r.Errors["filter"] == ""
	}
	if q := r.Streams; q != nil {
		gauge(queueDiscovered, float64(q.DiscoveredQueued))
		gauge(queueInFlight, float64(q.DiscoveredInFlight))
		gauge(queueRedelivered, float64(q.DiscoveredRedelivered), "discovered")
		gauge(queueRedelivered, float64(q.FrontierRedelivered), "frontier")
		gauge(queueFrontier, float64(q.FrontierQueued))
		for p, n := range q.Partitions {
			gauge(queuePartition, float64(n), strconv.Itoa(p))
		}
		for id, n := range q.Crawls {
			gauge(queueCrawl, float64(n), id)
		}
	}
	if c.s.src.Queues != nil {
		parts["streams"] = r.Streams != nil
	}
	for part, up := range parts {
		v := 0.0
		if up {
			v = 1
		}
		gauge(sourceUp, v, part)
	}
}

package frontier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Fetched is the record of one fetch, published by the crawler on
// <prefix>.fetched.<crawl> for tools downstream (indexers, extractors,
// reports): what was asked, what came back, and where the archive keeps it.
type Fetched struct {
	V      int       `json:"v"`
	Crawl  string    `json:"crawl"`
	URL    string    `json:"url"`
	Time   time.Time `json:"time"`             // when the request was sent
	Status int       `json:"status,omitempty"` // 0 without a response
	// Reason is why the fetch failed (crawl.Reason), empty when it did not.
	Reason    string `json:"reason,omitempty"`
	MIME      string `json:"mime,omitempty"`
	Digest    string `json:"digest,omitempty"` // payload digest, "sha1:…"
	Size      int64  `json:"size,omitempty"`   // payload bytes
	Truncated bool   `json:"truncated,omitempty"`
	Links     int    `json:"links"` // links found on the page
	// SimHash is a 2xx HTML page's near-duplicate fingerprint (package
	// fingerprint: 64-bit SimHash of its text's word 3-shingles, 16 hex
	// digits); Digest is then set whether or not the page was archived.
	SimHash string `json:"simhash,omitempty"`
	// DuplicateOf is an earlier URL of the crawl whose page this was,
	// Duplicate how they matched: "exact" (the same bytes) or "near" (the
	// same page but for its render-to-render noise).
	DuplicateOf string `json:"duplicate_of,omitempty"`
	Duplicate   string `json:"duplicate,omitempty"`
	Redirect    string `json:"redirect,omitempty"`
	// Record is "response" or "revisit" when the fetch was archived, with
	// its WARC file and the offset and length of its gzip member.
	Record   string `json:"record,omitempty"`
	RefersTo string `json:"refers_to,omitempty"`
	File     string `json:"file,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Length   int64  `json:"length,omitempty"`
	Crawler  string `json:"crawler,omitempty"`
}

// FetchedVersion is the format of Fetched events.
const FetchedVersion = 1

// FetchedStream is the stream of fetch events.
func (t Topology) FetchedStream() string { return t.upperPrefix() + "_FETCHED" }

// FetchedSubject is the subject of a crawl's fetch events.
func (t Topology) FetchedSubject(crawl string) string {
	return t.WithDefaults().Prefix + ".fetched." + crawl
}

// FetchedFilter matches every crawl's fetch events.
func (t Topology) FetchedFilter() string { return t.WithDefaults().Prefix + ".fetched.>" }

// ParseFetchedSubject returns the crawl of a fetch event's subject.
func (t Topology) ParseFetchedSubject(subject string) (crawl string, ok bool) {
	rest, ok := strings.CutPrefix(subject, t.WithDefaults().Prefix+".fetched.")
	if !ok || rest == "" || strings.Contains(rest, ".") {
		return "", false
	}
	return rest, true
}

// Defaults of the fetched stream: a log with limits, oldest events dropped
// first; consumers that need every event read faster than it turns over.
const (
	DefaultFetchedMaxAge   = 7 * 24 * time.Hour
	DefaultFetchedMaxBytes = 1 << 30
)

// FetchedConfig is the fetched stream's configuration: limits retention
// (events stay for every consumer until MaxAge or MaxBytes, then the oldest
// go), so tools downstream can replay it.
func (t Topology) FetchedConfig() jetstream.StreamConfig {
	t = t.WithDefaults()
	return jetstream.StreamConfig{
		Name:        t.FetchedStream(),
		Description: "Sieve: one event per fetch (status, digest, WARC location)",
		Subjects:    []string{t.FetchedFilter()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      DefaultFetchedMaxAge,
		MaxBytes:    DefaultFetchedMaxBytes,
		MaxMsgs:     -1,
		Storage:     t.Storage,
		Replicas:    t.Replicas,
		Duplicates:  discoveredWindow,
	}
}

// EnsureFetched creates the fetched stream or updates it to t's settings.
func (t Topology) EnsureFetched(ctx context.Context, js jetstream.JetStream) error {
	if _, err := Provision(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, t.FetchedConfig())
	}); err != nil {
		return fmt.Errorf("frontier: ensure stream %s: %w", t.FetchedStream(), err)
	}
	return nil
}

// PublishFetched publishes f and waits for JetStream to store it; id, if
// not empty, makes a retried publish stored once.
func (t Topology) PublishFetched(ctx context.Context, js jetstream.JetStream, f Fetched, id string) error {
	f.V = FetchedVersion
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("frontier: encode fetched: %w", err)
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: t.FetchedSubject(f.Crawl), Data: data}, opts...); err != nil {
		return fmt.Errorf("frontier: publish fetched: %w", err)
	}
	return nil
}

// DecodeFetched reads a fetch event.
func DecodeFetched(data []byte) (Fetched, error) {
	var f Fetched
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("frontier: fetched event: %w", err)
	}
	if f.V < 1 || f.V > FetchedVersion {
		return f, fmt.Errorf("frontier: fetched event version %d, this build reads 1 to %d", f.V, FetchedVersion)
	}
	if f.URL == "" || f.Crawl == "" {
		return f, errors.New("frontier: fetched event without url or crawl")
	}
	return f, nil
}

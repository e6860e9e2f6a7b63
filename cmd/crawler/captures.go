package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sievecrawl/sieve/warc"
)

// urlCaptures is what the captures command knows of one URL.
type urlCaptures struct {
	URL string `json:"url"` // canonical, as fetched
	// Last is the crawl's last capture (the record revisits refer to):
	// from the capture store, exact.
	Last *warc.Capture `json:"last,omitempty"`
	// Index lists every capture in warc.dir's CDXJ indexes, when given.
	Index []warc.IndexEntry `json:"index,omitempty"`
}

// capturesCommand says where the captures of URLs are: the crawl's last
// capture from its capture store (Redis, or the embedded data dir's
// bucket), and every capture the CDXJ indexes in warc.dir list.
func capturesCommand(ctx context.Context, s settings, urls []string, jsonOut bool, stdout io.Writer) error {
	canon, err := s.Normalize.Normalizer()
	if err != nil {
		return err
	}
	js, rdb, closeAll, err := s.stores("sieve-crawler-captures")
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := s.captureStore(ctx, js, rdb)
	if err != nil {
		return err
	}
	var out []urlCaptures
	for _, raw := range urls {
		u, err := canon.URL(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", raw, err)
		}
		uc := urlCaptures{URL: u}
		if c, ok, err := store.Last(ctx, s.Crawl.ID, u); err != nil {
			return err
		} else if ok {
			uc.Last = &c
		}
		if s.Warc.Dir != "" {
			if uc.Index, err = warc.Lookup(s.Warc.Dir, u); err != nil {
				return err
			}
		}
		out = append(out, uc)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, uc := range out {
		printCaptures(stdout, s, uc)
	}
	return nil
}

func printCaptures(w io.Writer, s settings, uc urlCaptures) {
	fmt.Fprintf(w, "%s (crawl %q)\n", uc.URL, s.Crawl.ID)
	if c := uc.Last; c != nil {
		fmt.Fprintf(w, "  last fetched %s (status %d), payload %s\n", c.Date.UTC().Format(time.RFC3339), c.Status, c.Digest)
		fmt.Fprintf(w, "  payload record: %s at offset %d (%s, %s)\n", c.File, c.Offset, c.PayloadURL, c.PayloadDate.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "  no capture in the crawl's capture store")
	}
	if s.Warc.Dir == "" {
		return
	}
	if len(uc.Index) == 0 {
		fmt.Fprintf(w, "  no capture in the indexes of %s\n", s.Warc.Dir)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  time\tstatus\tmime\tfile\toffset\tlength")
	for _, e := range uc.Index {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", e.Time, e.Status, e.MIME, e.Filename, e.Offset, e.Length)
	}
	tw.Flush()
}

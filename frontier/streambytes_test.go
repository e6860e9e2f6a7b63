package frontier_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/admit"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
)

var streamBytesN = flag.Int("sieve.streambytes.n", 200_000, "entries TestFrontierStreamBytes publishes (bench.sh scale sets it)")

// TestFrontierStreamBytes measures what a waiting URL costs on the
// frontier stream's disk, with the stream's S2 compression and without it
// (the same messages, the same run): 200,000 entries of 2,000 hosts
// published as a worker publishes them (entry, subject, message ID);
// ./bench.sh scale runs it at larger sizes.
// Compression must bring it to 160 bytes or less (issue 26).
func TestFrontierStreamBytes(t *testing.T) {
	n := *streamBytesN
	per := map[jetstream.StoreCompression]float64{}
	for _, comp := range []jetstream.StoreCompression{jetstream.NoCompression, jetstream.S2Compression} {
		srv := natstest.Start(t, natstest.Options{})
		js := srv.JetStream()
		topo := frontier.Topology{}
		if err := topo.Ensure(t.Context(), js); err != nil {
			t.Fatal(err)
		}
		cfg := topo.FrontierConfig()
		if cfg.Compression != jetstream.S2Compression {
			t.Errorf("FrontierConfig().Compression = %v, want s2", cfg.Compression)
		}
		// A stream's compression is chosen at its creation: the
		// baseline's is created again without.
		cfg.Compression = comp
		if err := js.DeleteStream(t.Context(), cfg.Name); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		p := frontier.NewPublisher(js, topo)
		for lo := 0; lo < n; lo += 1000 {
			urls := make([]admit.URL, 1000)
			for i := range urls[:min(1000, n-lo)] {
				j := lo + i
				urls[i] = admit.URL{Crawl: "default", Incarnation: "1",
					URL:   fmt.Sprintf("https://www.site%d.example/section-%d/articles/%d/some-title-of-an-article.html", j%2000, j%50, j),
					Depth: 3, From: fmt.Sprintf("https://www.site%d.example/section-%d/", j%2000, j%50)}
			}
			acks, err := p.Publish(t.Context(), urls[:min(1000, n-lo)])
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acks {
				if a.Err != nil {
					t.Fatal(a.Err)
				}
			}
		}
		st, err := js.Stream(t.Context(), topo.FrontierStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %d messages, %d bytes, compression %v", comp, info.State.Msgs, info.State.Bytes, info.Config.Compression)
		// A deployment whose stream predates compression takes it at
		// its next Ensure.
		if err := topo.Ensure(t.Context(), js); err != nil {
			t.Fatalf("Ensure over a %v stream: %v", comp, err)
		}
		srv.Shutdown() // seals and compresses the last block
		per[comp] = float64(streamDirBytes(t, srv.StoreDir, topo.FrontierStream())) / float64(n)
	}
	t.Logf("frontier stream on disk: %.0f B per waiting URL uncompressed (baseline), %.0f B with S2 (%.2f×)",
		per[jetstream.NoCompression], per[jetstream.S2Compression], per[jetstream.S2Compression]/per[jetstream.NoCompression])
	if got := per[jetstream.S2Compression]; got > 160 {
		t.Errorf("%.0f B per waiting URL with S2, want at most 160", got)
	}
}

// streamDirBytes is the size of a stream's files under a server's store.
func streamDirBytes(t *testing.T, storeDir, stream string) int64 {
	t.Helper()
	var n int64
	found := false
	err := filepath.WalkDir(storeDir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == stream {
			found = true
			return filepath.WalkDir(path, func(_ string, f os.DirEntry, err error) error {
				if err != nil || f.IsDir() {
					return err
				}
				fi, err := f.Info()
				if err == nil {
					n += fi.Size()
				}
				return err
			})
		}
		return nil
	})
	if err != nil || !found {
		t.Fatalf("stream %s under %s: found %v, %v", stream, storeDir, found, err)
	}
	return n
}

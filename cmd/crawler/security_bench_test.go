package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sievecrawl/sieve/auth/authtest"
	pb "github.com/sievecrawl/sieve/urlfrontier/urlfrontierpb"
)

// The cost of TLS and tokens on the API is a test that prints a table; it
// runs only when asked (bench.sh auth):
//
//	go test ./cmd/crawler -run TestAuthIngestCost -sieve.authbench -v
//
// Two `crawler serve --embedded` in this process, one plain and one with
// TLS (P-256), a client CA and a tokens file, take the same ingest: 4
// PutDiscovered streams of batches of 100 new URLs (a crawl token on the
// secured one, checked once per stream as every call is). Rounds
// alternate between them, each going first in every other round, so both
// see the machine alike; the result is the ratio of their medians (goal
// ≥ 0.85, issue 29).
var (
	authBench        = flag.Bool("sieve.authbench", false, "run the API's TLS and token cost table (TestAuthIngestCost)")
	authBenchBatches = flag.Int("sieve.authbench.batches", 400, "batches of 100 discovered URLs per round")
	authBenchRounds  = flag.Int("sieve.authbench.rounds", 5, "rounds of each, alternating (odd: the median is a round)")
)

func TestAuthIngestCost(t *testing.T) {
	if !*authBench {
		t.Skip("the API's TLS and token cost table runs with -sieve.authbench")
	}
	ca := authtest.NewCA(t, "bench CA")
	cert := ca.Server(t, "serve")
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	authtest.WriteFile(t, tokens, []byte(testTokens))
	var plainLog, securedLog syncBuffer
	plainAddr := bootServe(t, &plainLog, "--http-addr", "")
	securedAddr := bootServe(t, &securedLog, "--http-addr", "",
		"--urlfrontier-tls-cert", cert.CertFile, "--urlfrontier-tls-key", cert.KeyFile,
		"--urlfrontier-tls-client-ca", ca.CertFile, "--urlfrontier-tokens-file", tokens)
	plain := frontierClient(t, plainAddr, nil)
	secured := frontierClient(t, securedAddr, ca.ClientTLS(t, authtest.Pair{}))
	var plainRates, securedRates []float64
	for r := range *authBenchRounds {
		p := func() {
			plainRates = append(plainRates, ingestRate(t, plain, "", fmt.Sprintf("p%d", r), *authBenchBatches))
		}
		s := func() {
			securedRates = append(securedRates, ingestRate(t, secured, testCrawlToken, fmt.Sprintf("s%d", r), *authBenchBatches))
		}
		if r%2 == 0 { // each goes first in every other round
			p()
			s()
		} else {
			s()
			p()
		}
	}
	med := func(r []float64) float64 { s := slices.Clone(r); slices.Sort(s); return s[len(s)/2] }
	p, s := med(plainRates), med(securedRates)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tmedian URLs/s\trounds\tratio\tgoal\n")
	fmt.Fprintf(tw, "PutDiscovered, TLS + client CA + crawl token\t%.0f\t%.0f\t%.2f × plain\t≥ 0.85 × plain\n", s, securedRates, s/p)
	fmt.Fprintf(tw, "PutDiscovered, plain text, no authentication\t%.0f\t%.0f\t(baseline)\t\n", p, plainRates)
	tw.Flush()
}

// ingestRate puts batches of 100 new URLs (hosts named after round) through
// 4 PutDiscovered streams of c and returns the URLs admitted per second.
func ingestRate(t *testing.T, c pb.URLFrontierClient, token, round string, batches int) float64 {
	t.Helper()
	start := time.Now()
	var g errgroup.Group
	for s := range 4 {
		g.Go(func() error {
			st, err := c.PutDiscovered(authtest.Bearer(t, token))
			if err != nil {
				return err
			}
			sent := 0
			for b := s; b < batches; b += 4 {
				items := make([]*pb.URLInfo, 100)
				for i := range items {
					items[i] = &pb.URLInfo{Url: fmt.Sprintf("https://%s-%d.example/%d/%d", round, (b*100+i)%500, b, i), CrawlID: "bench"}
				}
				if err := st.Send(&pb.DiscoveredBatch{ID: fmt.Sprint(b), Items: items}); err != nil {
					return err
				}
				sent++
			}
			st.CloseSend()
			for range sent {
				a, err := st.Recv()
				if err != nil {
					return err
				}
				for _, v := range a.GetStatuses() {
					if v != pb.AckMessage_OK {
						return fmt.Errorf("batch %s: %v", a.GetID(), v)
					}
				}
			}
			if _, err := st.Recv(); err != io.EOF {
				return fmt.Errorf("end of stream: %v", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return float64(batches*100) / time.Since(start).Seconds()
}

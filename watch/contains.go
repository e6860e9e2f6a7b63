package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sievecrawl/sieve/auth"
)

// MaxContainsKeys bounds the keys of one /contains request.
const MaxContainsKeys = 10_000

// containsRequest and containsResponse are the bodies of POST /contains:
// canonical URLs in, whether the filter holds each out (in order).
type containsRequest struct {
	Keys []string `json:"keys"`
}

type containsResponse struct {
	Seen []bool `json:"seen"`
}

// serveContains answers POST /contains from Sources.Membership.
func (s *Server) serveContains(w http.ResponseWriter, r *http.Request) {
	if s.src.Membership == nil {
		http.Error(w, "no filter in this process", http.StatusNotFound)
		return
	}
	var req containsRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, "want {\"keys\": [canonical URLs]}: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.Keys) > MaxContainsKeys {
		http.Error(w, fmt.Sprintf("%d keys: at most %d a request", len(req.Keys), MaxContainsKeys), http.StatusRequestEntityTooLarge)
		return
	}
	keys := make([][]byte, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = []byte(k)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	seen, err := s.src.Membership.Contains(ctx, keys)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, containsResponse{Seen: seen})
}

// Contains is Client{}.Contains.
func Contains(ctx context.Context, pageURL string, keys [][]byte) ([]bool, error) {
	return Client{}.Contains(ctx, pageURL, keys)
}

// Contains asks the process whose page is at pageURL which of the canonical
// URLs keys its filter holds, MaxContainsKeys at a time.
func (c Client) Contains(ctx context.Context, pageURL string, keys [][]byte) ([]bool, error) {
	out := make([]bool, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), MaxContainsKeys)
		var req containsRequest
		for _, k := range keys[:n] {
			req.Keys = append(req.Keys, string(k))
		}
		seen, err := c.containsOnce(ctx, pageURL+"contains", req)
		if err != nil {
			return nil, err
		}
		if len(seen) != n {
			return nil, fmt.Errorf("watch: contains: %d answers for %d keys", len(seen), n)
		}
		out = append(out, seen...)
		keys = keys[n:]
	}
	return out, nil
}

func (c Client) containsOnce(ctx context.Context, url string, req containsRequest) ([]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.do(hr)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if auth.ExplainStatus(resp.StatusCode) != "" {
		return nil, refused(url, resp)
	}
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(http.MaxBytesReader(nil, resp.Body, 1024))
		return nil, fmt.Errorf("watch: %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg.Bytes()))
	}
	var out containsResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("watch: %s: %w", url, err)
	}
	return out.Seen, nil
}

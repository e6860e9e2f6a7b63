package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Health asks the process whose page is at base whether it is ready
// (GET /readyz: its NATS, Redis, filter and store answer) or, with live,
// only whether it runs (/healthz), within 3 seconds: the question an
// orchestrator's probe asks, over the client's TLS and credentials, so a
// probe verifies the server's certificate like any other client. nil means
// 200; a /readyz that answers 503 is an error naming what is not ready.
func (c Client) Health(ctx context.Context, base string, live bool) error {
	path := "readyz"
	if live {
		path = "healthz"
	}
	url := strings.TrimSuffix(base, "/") + "/" + path
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	resp, err := c.do(req)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		var body struct {
			NotReady map[string]string `json:"not_ready"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) == nil && len(body.NotReady) > 0 {
			var why []string
			for _, name := range slices.Sorted(maps.Keys(body.NotReady)) {
				why = append(why, name+": "+body.NotReady[name])
			}
			return fmt.Errorf("watch: %s: not ready: %s", url, strings.Join(why, "; "))
		}
	}
	return refused(url, resp)
}

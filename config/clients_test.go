package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/redis/go-redis/v9"

	"github.com/sievecrawl/sieve/config"
	"github.com/sievecrawl/sieve/frontier"
	"github.com/sievecrawl/sieve/natstest"
	"github.com/sievecrawl/sieve/redistest"
)

// dialCounter is a go-redis hook that counts new connections.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (d *dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isTimeout reports whether err is a deadline: the context's or the
// socket's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// TestRedisTimeoutIsNotRetried pins issue 10 item 8: a hung Redis (SIGSTOP)
// makes a command fail with a timeout after redis.timeout, and go-redis
// does not retry it on a new connection (it used to, three times, and a
// cluster client once more, so a hang looked like one call of four
// timeouts). The caller's own retry loop sees every timeout.
func TestRedisTimeoutIsNotRetried(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name  string
		start func(t *testing.T) (url string, hang *redistest.Server, cluster bool)
	}{
		{name: "single server", start: func(t *testing.T) (string, *redistest.Server, bool) {
			s := redistest.Start(t, redistest.Options{})
			return s.URL(), s, false
		}},
		{name: "cluster", start: func(t *testing.T) (string, *redistest.Server, bool) {
			c := redistest.StartCluster(t, 3)
			return strings.Join(c.Addrs, ","), c.Servers[0], true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, hang, cluster := tt.start(t)
			c, err := config.Redis{URL: url, Timeout: timeout}.Client()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			dials := &dialCounter{}
			if cc, ok := c.(*redis.ClusterClient); ok {
				cc.OnNewNode(func(n *redis.Client) { n.AddHook(dials) })
			} else {
				c.AddHook(dials)
			}
			ctx := context.Background()
			// A key on the server that will hang, and a connection to it
			// in the pool.
			key := "k"
			if cluster {
				key = keyOn(t, c.(*redis.ClusterClient), hang.Addr)
			}
			if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}

			hang.Pause()
			before := dials.n.Load()
			err = c.Get(ctx, key).Err()
			retried := dials.n.Load() - before
			hang.Resume()
			if !isTimeout(err) {
				t.Fatalf("GET on a hung Redis = %v, want a timeout", err)
			}
			if retried != 0 {
				t.Errorf("go-redis opened %d new connection(s) to retry a timed-out command, want 0", retried)
			}
			// The server answers again once it continues.
			if got, err := c.Get(ctx, key).Result(); err != nil || got != "v" {
				t.Errorf("GET after resume = %q, %v", got, err)
			}
		})
	}
}

// keyOn returns a key whose slot the cluster node at addr serves.
func keyOn(t *testing.T, c *redis.ClusterClient, addr string) string {
	t.Helper()
	ctx := context.Background()
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7.0; Sieve runs on 6.0 (dedup.MinRedisVersion)
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		key := fmt.Sprintf("k%d", i)
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 && s.Nodes[0].Addr == addr {
				return key
			}
		}
	}
	t.Fatalf("no key found on %s", addr)
	return ""
}

// TestNATSConnectOnce pins issue 10 items 5 and 7 for one-shot commands: an
// unreachable server is an error at once that names its address and the
// cause, and a server older than 2.10 is refused.
func TestNATSConnectOnce(t *testing.T) {
	addr := natstest.ClosedAddr(t)
	nc, err := config.NATS{URL: "nats://" + addr, ReconnectWait: time.Second}.ConnectOnce("test")
	if err == nil {
		nc.Close()
		t.Fatalf("ConnectOnce to a closed port succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, addr) || !strings.Contains(msg, "connection refused") {
		t.Errorf("ConnectOnce to a closed port = %q, want it to name %s and the cause (connection refused)", msg, addr)
	}

	current := natstest.Start(t, natstest.Options{})
	nc, err = config.NATS{URL: current.URL(), ReconnectWait: time.Second}.ConnectOnce("test")
	if err != nil {
		t.Fatalf("ConnectOnce to the embedded server = %v", err)
	}
	nc.Close()

	old := natstest.StartExternal(t, natstest.ExternalBinary(t))
	nc, err = config.NATS{URL: old.URL(), ReconnectWait: time.Second}.ConnectOnce("test")
	var major, minor int
	fmt.Sscanf(old.Version, "%d.%d", &major, &minor)
	if major > 2 || major == 2 && minor >= 10 {
		t.Logf("installed nats-server %s is recent enough: the refusal is not exercised", old.Version)
		if err != nil {
			t.Errorf("ConnectOnce to nats-server %s = %v", old.Version, err)
		} else {
			nc.Close()
		}
		return
	}
	if !errors.Is(err, frontier.ErrServerTooOld) {
		if nc != nil {
			nc.Close()
		}
		t.Errorf("ConnectOnce to nats-server %s = %v, want ErrServerTooOld", old.Version, err)
	}
}

// TestRedisPing checks the one-shot commands' first contact with Redis: a
// closed port fails within seconds naming the server and the cause, a real
// server answers, and a password in the URL is not repeated.
func TestRedisPing(t *testing.T) {
	addr := natstest.ClosedAddr(t)
	r := config.Redis{URL: "redis://:secret@" + addr, Timeout: 10 * time.Second}
	c, err := r.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	err = r.Ping(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "secret") {
		t.Errorf("Ping to a closed port = %v, want an error naming %s and the cause, without the password", err, addr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Ping to a closed port took %v", d)
	}
	srv := redistest.Start(t, redistest.Options{})
	r = config.Redis{URL: srv.URL(), Timeout: 10 * time.Second}
	if c, err = r.Client(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := r.Ping(context.Background(), c); err != nil {
		t.Errorf("Ping to a real server: %v", err)
	}
}

// TestRedisNodeOptions: each address of redis.url gets its own client
// options, with the URL's credentials or redis.password over them (the
// nodes redis-cluster-init talks to one by one).
func TestRedisNodeOptions(t *testing.T) {
	for _, tt := range []struct {
		name, url, password string
		want                []string // addr user:password tls
	}{
		{"one server", "redis://u:p@h:1/2", "", []string{"h:1 u:p false"}},
		{"cluster list", "redis-1:6379, redis-2:6379,redis-3:6379", "", []string{"redis-1:6379 : false", "redis-2:6379 : false", "redis-3:6379 : false"}},
		{"password over the URLs'", "rediss://a:x@h1:1,rediss://a:y@h2:2", "z", []string{"h1:1 a:z true", "h2:2 a:z true"}},
	} {
		opts, err := config.Redis{URL: tt.url, Password: tt.password}.NodeOptions()
		var got []string
		for _, o := range opts {
			got = append(got, fmt.Sprintf("%s %s:%s %v", o.Addr, o.Username, o.Password, o.TLSConfig != nil))
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s: NodeOptions(%q) = %q, %v; want %q", tt.name, tt.url, got, err, tt.want)
		}
	}
	if _, err := (config.Redis{URL: "nohost"}).NodeOptions(); err == nil || !strings.Contains(err.Error(), "redis.url") {
		t.Errorf("NodeOptions of a bad URL = %v, want an error naming redis.url", err)
	}
}

// recordingDialer dials like net.Dialer and keeps every byte the client
// writes, to see what a CONNECT carries.
type recordingDialer struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (d *recordingDialer) Dial(network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 3 * time.Second}).Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, d: d}, nil
}

func (d *recordingDialer) written() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

type recordedConn struct {
	net.Conn
	d *recordingDialer
}

func (c *recordedConn) Write(p []byte) (int, error) {
	c.d.mu.Lock()
	c.d.out.Write(p)
	c.d.mu.Unlock()
	return c.Conn.Write(p)
}

// TestNATSCredsNKeySeed pins issue 39, item 6: a file holding only a
// user's NKey seed, given as nats.creds, was sent to the server as the
// user's JWT (a private key on the wire, and in a server's -DV log), and
// an NKey user could not connect. Such a file now signs the server's
// nonce as that NKey user, and its seed never leaves the process; a
// creds file with a JWT still sends its JWT.
func TestNATSCredsNKeySeed(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	pub, _ := user.PublicKey()
	srv := natstest.Start(t, natstest.Options{NKeys: []string{pub}})
	// A JWT of the right shape; this server is not in operator mode and
	// refuses it, but the client must send it.
	const jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl"
	decoratedSeed := "-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n"
	cases := []struct {
		name, file string
		connects   bool   // the NKey user is accepted
		jwt        string // the JWT the CONNECT carries ("": none)
		field      bool   // refused by Options as nats.creds
	}{
		{"a bare seed", string(seed), true, "", false},
		{"a bare seed and a newline", string(seed) + "\n", true, "", false},
		{"a decorated seed alone", decoratedSeed, true, "", false},
		{"a creds file: JWT and seed", "-----BEGIN NATS USER JWT-----\n" + jwt + "\n------END NATS USER JWT------\n\n" + decoratedSeed,
			false, jwt, false},
		{"neither a JWT nor a seed", "not a key\n", false, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "user.creds")
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			rec := &recordingDialer{}
			nc, err := config.NATS{URL: srv.URL(), Creds: path, ReconnectWait: time.Second}.
				ConnectOnce("test", nats.SetCustomDialer(rec))
			if nc != nil {
				defer nc.Close()
			}
			var fe *config.FieldError
			if c.field {
				if !errors.As(err, &fe) || fe.Field != "nats.creds" {
					t.Fatalf("ConnectOnce = %v, want a nats.creds FieldError", err)
				}
				return
			}
			if c.connects && err != nil {
				t.Errorf("ConnectOnce as the NKey user = %v", err)
			}
			if !c.connects && err == nil {
				t.Fatalf("ConnectOnce with a JWT to a server not in operator mode succeeded")
			}
			sent := rec.written()
			if strings.Contains(sent, string(seed)) {
				t.Errorf("the seed was sent to the server: %q", sent)
			}
			connect, _, _ := strings.Cut(sent[strings.Index(sent, "CONNECT "):], "\r\n")
			var fields struct {
				JWT  string `json:"jwt"`
				NKey string `json:"nkey"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(connect, "CONNECT ")), &fields); err != nil {
				t.Fatalf("CONNECT %q: %v", connect, err)
			}
			if fields.JWT != c.jwt {
				t.Errorf("CONNECT's jwt = %q, want %q", fields.JWT, c.jwt)
			}
			if c.jwt == "" && fields.NKey != pub {
				t.Errorf("CONNECT's nkey = %q, want the user's %q", fields.NKey, pub)
			}
		})
	}
}

package frontier

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sievecrawl/sieve/urlstore"
)

// The per-URL stores' snapshots (urlstore.Compact) live beside their log,
// replicated like it:
//
//	<PREFIX>_STORE_SNAP  object store: object <name>/<snapshot>, a copy of
//	                     store <name>'s index (a tar of a Pebble checkpoint)
//	<PREFIX>_STORE_META  key-value bucket: key <name>.manifest, the current
//	                     snapshot and how far the log is trimmed
//
// A snapshot is one object whatever its size (the object store chunks it),
// and the manifest one key per store: nothing here grows per URL.

// StoreSnapshotsBucket is the object store of the stores' snapshots.
func (t Topology) StoreSnapshotsBucket() string { return t.upperPrefix() + "_STORE_SNAP" }

// StoreMetaBucket is the key-value bucket of the stores' manifests.
func (t Topology) StoreMetaBucket() string { return t.upperPrefix() + "_STORE_META" }

// StoreSnapshots keeps the snapshots of store name in JetStream: a
// urlstore.Snapshots. It is safe for concurrent use.
type StoreSnapshots struct {
	obj  jetstream.ObjectStore
	kv   jetstream.KeyValue
	name string
}

var _ urlstore.Snapshots = (*StoreSnapshots)(nil)

// OpenStoreSnapshots opens the snapshots of store name, creating their
// buckets if needed.
func OpenStoreSnapshots(ctx context.Context, js jetstream.JetStream, topo Topology, name string) (*StoreSnapshots, error) {
	topo = topo.WithDefaults()
	if !ValidCrawl(name) {
		return nil, fmt.Errorf("frontier: store name %q is not a subject token", name)
	}
	obj, err := Provision(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      topo.StoreSnapshotsBucket(),
			Description: "Sieve: snapshots of its per-URL stores' indexes, which a new process starts from",
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
			// Not compressed: a snapshot's tables are compressed by
			// Pebble already, and NATS would decompress every block of
			// the bucket to rebuild its state after an unclean stop
			// within 2 minutes of a snapshot (see StoreConfig).
			Compression: false,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: store snapshots bucket: %w", err)
	}
	kv, err := Provision(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      topo.StoreMetaBucket(),
			Description: "Sieve: each per-URL store's current snapshot and how far its log is trimmed",
			History:     1,
			Storage:     topo.Storage,
			Replicas:    topo.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: store manifests bucket: %w", err)
	}
	return &StoreSnapshots{obj: obj, kv: kv, name: name}, nil
}

func (s *StoreSnapshots) object(snapshot string) string { return s.name + "/" + snapshot }
func (s *StoreSnapshots) key() string                   { return s.name + ".manifest" }

// Put implements urlstore.Snapshots.
func (s *StoreSnapshots) Put(ctx context.Context, snapshot string, r io.Reader) error {
	if _, err := s.obj.Put(ctx, jetstream.ObjectMeta{Name: s.object(snapshot)}, r); err != nil {
		return fmt.Errorf("frontier: store snapshot %s: %w", s.object(snapshot), err)
	}
	return nil
}

// Open implements urlstore.Snapshots.
func (s *StoreSnapshots) Open(ctx context.Context, snapshot string) (io.ReadCloser, error) {
	r, err := s.obj.Get(ctx, s.object(snapshot))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", urlstore.ErrNoSnapshot, s.object(snapshot))
	}
	if err != nil {
		return nil, fmt.Errorf("frontier: read snapshot %s: %w", s.object(snapshot), err)
	}
	return r, nil
}

// Delete implements urlstore.Snapshots.
func (s *StoreSnapshots) Delete(ctx context.Context, snapshot string) error {
	err := s.obj.Delete(ctx, s.object(snapshot))
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("frontier: delete snapshot %s: %w", s.object(snapshot), err)
	}
	return nil
}

// Manifest implements urlstore.Snapshots.
func (s *StoreSnapshots) Manifest(ctx context.Context) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, s.key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("frontier: read %s: %w", s.key(), err)
	}
	return e.Value(), e.Revision(), nil
}

// SetManifest implements urlstore.Snapshots.
func (s *StoreSnapshots) SetManifest(ctx context.Context, b []byte, rev uint64) (uint64, error) {
	var next uint64
	var err error
	if rev == 0 {
		next, err = s.kv.Create(ctx, s.key(), b)
	} else {
		next, err = s.kv.Update(ctx, s.key(), b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || IsWrongSequence(err) {
		return 0, urlstore.ErrConflict
	}
	if err != nil {
		return 0, fmt.Errorf("frontier: write %s: %w", s.key(), err)
	}
	return next, nil
}

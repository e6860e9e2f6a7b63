package urlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrNoSnapshot is the error of Snapshots.Open for a name it does not hold.
var ErrNoSnapshot = errors.New("urlstore: no such snapshot")

// Snapshots keeps a store's snapshots (each a copy of an index, which a
// store opened in an empty or stale directory starts from) and the
// manifest naming the current one, which says up to where the log may be
// trimmed. Declared here, where it is used; frontier.StoreSnapshots keeps
// them in JetStream (an object store and a key-value bucket, replicated
// like the log), MemSnapshots in memory for tests.
type Snapshots interface {
	// Put stores what r gives as snapshot name, replacing any.
	Put(ctx context.Context, name string, r io.Reader) error
	// Open reads snapshot name; an error wraps ErrNoSnapshot if there is
	// none.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// Delete removes snapshot name; nil if there is none.
	Delete(ctx context.Context, name string) error
	// Manifest returns the manifest and its revision (nil, 0: none yet).
	Manifest(ctx context.Context) ([]byte, uint64, error)
	// SetManifest stores b as the manifest if its revision is still rev
	// (0: there is none yet), returning the new revision, else
	// ErrConflict.
	SetManifest(ctx context.Context, b []byte, rev uint64) (uint64, error)
}

// MemSnapshots is Snapshots in memory, for tests. The zero value is empty;
// it is safe for concurrent use.
type MemSnapshots struct {
	mu       sync.Mutex
	snaps    map[string][]byte
	manifest []byte
	rev      uint64
}

var _ Snapshots = (*MemSnapshots)(nil)

// Put implements Snapshots.
func (m *MemSnapshots) Put(ctx context.Context, name string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snaps == nil {
		m.snaps = map[string][]byte{}
	}
	m.snaps[name] = b
	return ctx.Err()
}

// Open implements Snapshots.
func (m *MemSnapshots) Open(_ context.Context, name string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.snaps[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, name)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Delete implements Snapshots.
func (m *MemSnapshots) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.snaps, name)
	return nil
}

// Manifest implements Snapshots.
func (m *MemSnapshots) Manifest(context.Context) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.manifest), m.rev, nil
}

// SetManifest implements Snapshots.
func (m *MemSnapshots) SetManifest(_ context.Context, b []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev != m.rev {
		return 0, ErrConflict
	}
	m.manifest = bytes.Clone(b)
	m.rev++
	return m.rev, nil
}

// Names lists the snapshots held (tests check that old ones go).
func (m *MemSnapshots) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.snaps {
		out = append(out, n)
	}
	return out
}

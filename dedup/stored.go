package dedup

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// StoredSnapshotKind returns the kind ("bloom" or "cuckoo") of the filter
// whose snapshot is the file at path, from its magic bytes (the formats of
// ScalableBloom.Save, Cuckoo.WriteTo and Window.Save), "unknown" if the file
// exists but holds none of them (nor a window's header naming either), or
// "" if there is no file; and whether it is a revisit window's (whose kind
// is its generations'). It writes nothing.
func StoredSnapshotKind(path string) (kind string, window bool, err error) {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	defer file.Close()
	var head [11]byte
	if _, err := io.ReadFull(file, head[:8]); err != nil {
		return "unknown", false, nil
	}
	switch string(head[:8]) {
	case snapshotMagic:
		return "bloom", false, nil
	case cuckooMagic:
		return "cuckoo", false, nil
	case windowMagic:
		// The header's kind byte names the generations'.
		if _, err := io.ReadFull(file, head[8:]); err == nil {
			switch head[10] {
			case windowKindBloom:
				return "bloom", true, nil
			case windowKindCuckoo:
				return "cuckoo", true, nil
			}
		}
	}
	return "unknown", false, nil
}

// WindowStats describes a revisit window (Window): its parameters and its
// live generations, oldest first.
type WindowStats struct {
	// After is the window D: a key is seen for at least D after it was
	// admitted.
	After time.Duration `json:"after_ns"`
	// Granularity is g: a key is new again by D·(1+1/g).
	Granularity int `json:"granularity"`
	// Period is how long each generation takes keys: L = ceil(D/g).
	Period time.Duration `json:"period_ns"`
	// Generations are the live generations that exist.
	Generations []GenerationStats `json:"generations"`
}

// ReadWindow describes f's revisit window if it is one (a *Window), else
// it returns nil.
func ReadWindow(ctx context.Context, f Filter) (*WindowStats, error) {
	w, ok := f.(*Window)
	if !ok {
		return nil, nil
	}
	gens, err := w.Generations(ctx)
	if err != nil {
		return nil, err
	}
	o := w.Options()
	g := time.Duration(o.Granularity)
	return &WindowStats{After: o.After, Granularity: o.Granularity, Period: (o.After + g - 1) / g, Generations: gens}, nil
}

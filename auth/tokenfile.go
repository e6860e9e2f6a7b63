package auth

import (
	"bytes"
	"io"
	"log/slog"
	"time"
)

// TokenFile is the current set of tokens of a tokens file (ParseTokens),
// read again every interval and swapped when the file changed (see the
// package documentation). Close stops it. It is safe for concurrent use.
type TokenFile struct {
	r *reloader[*Tokens]
}

// FileOptions configures a TokenFile or a CertFile. Zero values mean the
// defaults.
type FileOptions struct {
	// Interval is how often the files are read again (default
	// DefaultReloadInterval).
	Interval time.Duration
	// Logger logs reloads and failed ones (nil: discard).
	Logger *slog.Logger
	// Failed, if set, is called at each failed reload (a metric).
	Failed func()
}

func (o FileOptions) withDefaults() FileOptions {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Failed == nil {
		o.Failed = func() {}
	}
	return o
}

// OpenTokenFile reads the tokens file at path, which must hold at least one
// token, and keeps it current until Close.
func OpenTokenFile(path string, o FileOptions) (*TokenFile, error) {
	o = o.withDefaults()
	r := &reloader[*Tokens]{
		paths: []string{path}, logger: o.Logger, what: "tokens", failed: o.Failed,
		parse: func(c [][]byte) (*Tokens, error) {
			t, err := ParseTokens(bytes.NewReader(c[0]))
			if err == nil && t.Len() == 0 {
				err = errEmptyTokens
			}
			return t, err
		},
	}
	if err := r.start(o.Interval); err != nil {
		return nil, err
	}
	return &TokenFile{r: r}, nil
}

// Tokens returns the current set.
func (f *TokenFile) Tokens() *Tokens { return *f.r.cur.Load() }

// Changed returns a channel closed when the set is next swapped (the
// file changed and parsed). Take it before reading the set to miss no
// change.
func (f *TokenFile) Changed() <-chan struct{} { return f.r.changed() }

// Close stops reading the file. It is idempotent.
func (f *TokenFile) Close() error {
	f.r.close()
	return nil
}

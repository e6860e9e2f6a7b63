package sitemap

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks, for any input, with the default limits and with small
// ones: no panic; an error is an *Error with a known Reason (yield never
// fails here) wrapping its sentinel; every entry is an absolute http(s) URL
// of valid UTF-8 within the length limit, of the document's kind, whose
// LastModTime is its LastMod parsed; the counts agree with what was yielded
// and stay within the limits; parsing is deterministic; and the gzipped
// input gives the same entries and reason.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		if len(c.in) < 4096 {
			f.Add(c.in)
		}
	}
	reasons := Reasons()
	limits := []Limits{{}, {MaxURLs: 3, MaxBytes: 512, MaxURLLength: 40}}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, lim := range limits {
			res, got, reason := fuzzParse(t, in, lim, reasons)
			if res.Gzip && !bytes.HasPrefix(in, []byte{0x1f, 0x8b}) {
				t.Errorf("Gzip without the magic bytes")
			}
			res2, got2, reason2 := fuzzParse(t, in, lim, reasons)
			if res2 != res || reason2 != reason || !slices.Equal(got, got2) {
				t.Errorf("not deterministic: %+v %q %q, then %+v %q %q", res, reason, got, res2, reason2, got2)
			}
			if res.Gzip || len(in) > 4096 || lim.MaxBytes != 0 {
				continue
			}
			resz, gotz, reasonz := fuzzParse(t, gzipped(in), lim, reasons)
			if reasonz != reason || !slices.Equal(got, gotz) || resz.Kind != res.Kind || resz.Skipped != res.Skipped {
				t.Errorf("gzipped: %+v %q %q, plain: %+v %q %q", resz, reasonz, gotz, res, reason, got)
			}
		}
	})
}

// fuzzParse parses in, checks the invariants of FuzzParse that hold for one
// parse, and returns the Result, the locs and the reason ("" for none).
func fuzzParse(t *testing.T, in []byte, lim Limits, reasons []Reason) (Result, []string, Reason) {
	t.Helper()
	l := lim.withDefaults()
	var got []string
	res, err := Parse(bytes.NewReader(in), lim, func(e Entry) error {
		if !utf8.ValidString(e.Loc) || len(e.Loc) > l.MaxURLLength || e.URL == nil ||
			(e.URL.Scheme != "http" && e.URL.Scheme != "https") || e.URL.Hostname() == "" ||
			!strings.HasPrefix(strings.ToLower(e.Loc), e.URL.Scheme+"://") {
			t.Errorf("entry %q: not an absolute http(s) URL within %d bytes of UTF-8", e.Loc, l.MaxURLLength)
		}
		if e.Kind == "" || len(e.LastMod) > maxLastMod || !parseLastMod(e.LastMod).Equal(e.LastModTime) {
			t.Errorf("entry %+v: bad Kind or LastMod", e)
		}
		got = append(got, e.Loc+" @ "+e.LastMod)
		return nil
	})
	var reason Reason
	if err != nil {
		e, ok := errors.AsType[*Error](err)
		if !ok || !slices.Contains(reasons, e.Reason) || e.Reason == ReasonBadURL || !errors.Is(err, e.Reason.sentinel()) {
			t.Fatalf("Parse error %v: not an *Error with a known reason", err)
		}
		reason = e.Reason
	}
	if res.URLs != len(got) || res.URLs+res.Skipped > l.MaxURLs || res.Bytes > l.MaxBytes || (len(got) > 0 && res.Kind == "") {
		t.Errorf("Result %+v after %d entries: counts disagree or exceed %+v", res, len(got), l)
	}
	return res, got, reason
}

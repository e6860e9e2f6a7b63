package fingerprint

import (
	"reflect"
	"testing"
)

// FuzzOf checks Of's invariants on any body: it never panics, it is
// deterministic, it keeps at most MaxBlocks blocks, a page has changed in
// no block against itself, Text is 0 exactly when there are no blocks, and
// the one-pass hashes agree with reference's, and tokenizer splits the body
// as x/net's Tokenizer does.
func FuzzOf(f *testing.F) {
	for _, tt := range blockTextTests {
		f.Add([]byte(tt.body))
	}
	for _, b := range tokenizerTests {
		f.Add([]byte(b))
	}
	f.Add([]byte(pinnedPage))
	f.Add([]byte(page("2024-05-01 12:00:01", "red", "10", "a1")))
	f.Add([]byte(`<link rel="Canonical foo" href=" /a?b&amp;c "><svg><p>x</svg><template><p>y</template>`))
	f.Add([]byte("<table><tr><td><ul><li><p>a<li>b<dd>c<dt>d<option>e<h1><h2>f</table>g</body>h</html>i"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := Of(body)
		if q := Of(body); !reflect.DeepEqual(p, q) {
			t.Fatalf("Of(%q) not deterministic: %+v, then %+v", body, p, q)
		}
		if len(p.Blocks) > MaxBlocks {
			t.Errorf("Of(%q): %d blocks, want ≤ %d", body, len(p.Blocks), MaxBlocks)
		}
		if c := Changed(p.Blocks, p.Blocks); c != nil {
			t.Errorf("Of(%q): Changed(Blocks, Blocks) = %x, want nil", body, c)
		}
		if (p.Text == 0) != (p.Blocks == nil) {
			t.Errorf("Of(%q): Text %#x with %d blocks", body, p.Text, len(p.Blocks))
		}
		if p.Size != len(body) || p.Digest != Digest(body) {
			t.Errorf("Of(%q): Size %d, Digest %s; want %d, %s", body, p.Size, p.Digest, len(body), Digest(body))
		}
		checkReference(t, body)
		checkTokenizer(t, body)
	})
}

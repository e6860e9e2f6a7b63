package fingerprint_test

import (
	"fmt"

	"github.com/sievecrawl/sieve/fingerprint"
)

// Two fetches of one product page: the links carry another session id and
// the footer another render time. The bytes differ, the Blocks name the one
// block that changed, and a caller that has seen that block change between
// renders before can call the pages the same.
func Example() {
	render := func(session, stamp string) []byte {
		return []byte(`<html><head><title>Widget</title>
<link rel="canonical" href="/widget"></head><body>
<nav><a href="/?sid=` + session + `">Home</a></nav>
<p class="price">Colour: red, price 10</p>
<footer><p class="stamp">Rendered ` + stamp + `</p></footer></body></html>`)
	}
	a := fingerprint.Of(render("a1", "12:00:01"))
	b := fingerprint.Of(render("b2", "12:00:07"))

	fmt.Println("same bytes:", a.Digest == b.Digest)
	fmt.Println("same text:", a.Text == b.Text)
	fmt.Println("blocks:", len(a.Blocks), "changed:", len(fingerprint.Changed(a.Blocks, b.Blocks)))
	fmt.Println("the stamp changed:", fingerprint.Changed(a.Blocks, b.Blocks)[0] == a.Blocks[len(a.Blocks)-1].Path)
	fmt.Println("canonical:", a.Canonical)
	// Output:
	// same bytes: false
	// same text: false
	// blocks: 4 changed: 1
	// the stamp changed: true
	// canonical: /widget
}

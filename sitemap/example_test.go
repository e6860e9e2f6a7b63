package sitemap_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/sievecrawl/sieve/sitemap"
)

// A crawler parses a sitemap it found in robots.txt, keeps the entries the
// host rule allows, queues an index's children for another fetch, and
// counts a stopped parse by its reason: a document cut
// off in transfer still gives the entries before the cut.
func ExampleParse() {
	robots, _ := url.Parse("https://www.example.com/robots.txt")
	from, _ := url.Parse("https://www.example.com/sitemap.xml")
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://www.example.com/</loc><lastmod>2024-03-05</lastmod></url>
  <url><loc>https://elsewhere.example/spam</loc></url>
  <url><loc>/relative</loc></url>
  <url><loc>https://www.example.com/about</loc></url>
  <url><loc>https://www.example.com/cut-off`
	res, err := sitemap.Parse(strings.NewReader(doc), sitemap.Limits{}, func(e sitemap.Entry) error {
		switch {
		case !sitemap.Allowed(e.URL, from, robots):
			fmt.Println("refused:", e.Loc)
		case e.Kind == sitemap.KindIndex:
			fmt.Println("child sitemap:", e.Loc)
		default:
			fmt.Println("page:", e.Loc, e.LastModTime.IsZero())
		}
		return nil
	})
	if e, ok := errors.AsType[*sitemap.Error](err); ok {
		fmt.Println("stopped:", e.Reason)
	}
	fmt.Printf("%s: %d yielded, %d skipped\n", res.Kind, res.URLs, res.Skipped)
	// Output:
	// page: https://www.example.com/ false
	// refused: https://elsewhere.example/spam
	// page: https://www.example.com/about true
	// stopped: malformed_xml
	// urlset: 3 yielded, 1 skipped
}

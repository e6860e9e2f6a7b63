package fingerprint

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var benchFlag = flag.Bool("sieve.fingerprintbench", false, "run TestOfCost: ns/page of Of against SHA-1 alone, median of 3")

// realisticPage renders a 30 KB article page as a CMS would serve it: a
// head with metadata, an inline style and a JSON script, a navigation bar,
// an article of paragraphs with inline links, a table, a sidebar, a footer
// and trailing scripts. About a third of its bytes are markup the text
// ignores.
func realisticPage() []byte {
	c := newCorpus(7, 3000)
	rng := c.rng
	sentence := func(n int) string {
		ws := c.words(n)
		ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
		for i := range ws {
			switch rng.IntN(12) {
			case 0:
				ws[i] = fmt.Sprintf(`<a href="/wiki/%s?ref=art" class="link internal">%s</a>`, ws[i], ws[i])
			case 1:
				ws[i] = "<em>" + ws[i] + "</em>"
			}
		}
		return strings.Join(ws, " ") + ". "
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="description" content="An article about widgets and their many uses.">
<title>Widgets and their uses | The Example Journal</title>
<link rel="stylesheet" href="/static/css/main.4f9a1c.css">
<link rel="canonical" href="https://journal.example.com/2024/05/widgets">
<style>
`)
	for i := range 40 {
		fmt.Fprintf(&b, ".c%d { margin: %dpx; padding: 0 %dpx; color: #%06x }\n", i, i, i*2, rng.IntN(1<<24))
	}
	b.WriteString("</style>\n<script type=\"application/ld+json\">{\"@context\":\"https://schema.org\",\"@type\":\"NewsArticle\",\"keywords\":[")
	for i := range 120 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q", c.words(1)[0])
	}
	b.WriteString("]}</script>\n</head>\n<body class=\"article-page\">\n<header id=\"site-header\" class=\"header\"><nav class=\"nav\"><ul class=\"menu\">\n")
	for i := range 20 {
		fmt.Fprintf(&b, `<li class="menu-item"><a href="/section/%d" class="menu-link">%s</a></li>`+"\n", i, strings.Join(c.words(1+rng.IntN(2)), " "))
	}
	b.WriteString("</ul></nav></header>\n<main id=\"content\"><article class=\"post\">\n<h1 class=\"title\">Widgets and their uses</h1>\n<p class=\"byline\">By A. Writer, <time datetime=\"2024-05-01\">1 May 2024</time></p>\n")
	for range 14 {
		b.WriteString(`<p class="para">`)
		for range 3 + rng.IntN(4) {
			b.WriteString(sentence(8 + rng.IntN(14)))
		}
		b.WriteString("</p>\n")
		if rng.IntN(4) == 0 {
			fmt.Fprintf(&b, "<h2 class=\"subhead\">%s</h2>\n", sentence(4))
		}
	}
	b.WriteString("<table class=\"data\"><thead><tr><th>Name</th><th>Size</th><th>Price</th></tr></thead><tbody>\n")
	for i := range 12 {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%d cm</td><td>€%d.%02d</td></tr>\n", c.words(1)[0], 10+i, rng.IntN(100), rng.IntN(100))
	}
	b.WriteString("</tbody></table>\n</article>\n<aside class=\"sidebar\"><h2>Related</h2><ul>\n")
	for i := range 10 {
		fmt.Fprintf(&b, `<li><a href="/2024/04/%d">%s</a></li>`+"\n", i, sentence(5))
	}
	b.WriteString("</ul></aside></main>\n<footer id=\"footer\"><p>© 2024 The Example Journal</p><p class=\"stamp\">Rendered 2024-05-01T12:00:01Z in 42 ms</p></footer>\n")
	b.WriteString("<script>(function(){var d=document,s=d.createElement('script');s.src='/static/js/app.9c1e.js';s.async=true;d.body.appendChild(s)})();</script>\n")
	for b.Len() < 30_000 {
		b.WriteString("<script>window.__state = window.__state || []; window.__state.push({\"k\": \"" + c.words(1)[0] + "\", \"v\": " + fmt.Sprint(rng.IntN(1000)) + "});</script>\n")
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

func BenchmarkOf(b *testing.B) {
	page := realisticPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		Of(page)
	}
}

// BenchmarkDigest is BenchmarkOf's baseline: SHA-1 of the same page, which
// every fetch pays for its WARC record anyway.
func BenchmarkDigest(b *testing.B) {
	page := realisticPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		Digest(page)
	}
}

// TestOfCost prints the cost of Of on the realistic 30 KB page against its
// baseline, SHA-1 alone (Digest), measured in the same run: the median of 3
// runs of each, interleaved, by testing.Benchmark.
//
//	go test ./fingerprint -run TestOfCost -sieve.fingerprintbench -v
func TestOfCost(t *testing.T) {
	if !*benchFlag {
		t.Skip("needs -sieve.fingerprintbench")
	}
	page := realisticPage()
	p := Of(page)
	t.Logf("page: %d bytes, %d blocks, %d bytes of normalized text", len(page), len(p.Blocks), len(strings.Join(blockTexts(string(page)), " ")))
	var of, digest []float64
	var ofAllocs int64
	for range 3 {
		r := testing.Benchmark(BenchmarkOf)
		of = append(of, float64(r.NsPerOp()))
		ofAllocs = r.AllocsPerOp()
		r = testing.Benchmark(BenchmarkDigest)
		digest = append(digest, float64(r.NsPerOp()))
	}
	slices.Sort(of)
	slices.Sort(digest)
	mb := func(ns float64) float64 { return float64(len(page)) / ns * 1e9 / 1e6 }
	t.Logf("Of:     %8.0f ns/page (%.0f MB/s, %d allocs/page), runs %v", of[1], mb(of[1]), ofAllocs, of)
	t.Logf("Digest: %8.0f ns/page (%.0f MB/s), runs %v", digest[1], mb(digest[1]), digest)
	t.Logf("Of / Digest = %.1f; Of is %v per page", of[1]/digest[1], time.Duration(of[1]))
}

package normalize

import (
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/PuerkitoBio/purell"
)

// benchLinks is a realistic mix of links as found on documentation pages:
// relative and absolute, with fragments, tracking parameters, mixed case,
// dot segments, default ports, escapes, and already-canonical ones.
var benchLinks = []struct{ page, ref string }{
	{"https://www.postgresql.org/docs/current/sql-select.html", "#SQL-WITH"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "#SQL-FROM"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "sql-insert.html"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "sql-update.html#SQL-UPDATE-RETURNING"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "queries-with.html"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "../current/index.html"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "/docs/16/sql-select.html"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "https://www.postgresql.org/docs/current/functions-string.html"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "https://www.postgresql.org/"},
	{"https://www.postgresql.org/docs/current/sql-select.html", "/about/policies/privacy/?utm_source=docs&utm_medium=footer"},
	{"https://docs.python.org/3/library/os.html", "#os.getcwd"},
	{"https://docs.python.org/3/library/os.html", "os.path.html#os.path.join"},
	{"https://docs.python.org/3/library/os.html", "../reference/datamodel.html#object.__fspath__"},
	{"https://docs.python.org/3/library/os.html", "./stdtypes.html"},
	{"https://docs.python.org/3/library/os.html", "https://docs.python.org/3/library/os.html"},
	{"https://docs.python.org/3/library/os.html", "HTTPS://Docs.Python.org:443/3/library/sys.html#sys.argv"},
	{"https://docs.python.org/3/library/os.html", "../../3.12/library/os.html"},
	{"https://docs.python.org/3/library/os.html", "../genindex.html?lang=en&v=3"},
	{"https://docs.python.org/3/library/os.html", "//www.python.org/psf/donations/?gclid=Cj0KCQ&fbclid=IwAR"},
	{"https://docs.python.org/3/library/os.html", "https://github.com/python/cpython/blob/3.12/Lib/os.py"},
	{"http://example.com/shop/list.php?cat=7", "item.php?id=42&cat=7&PHPSESSID=a3f9c2"},
	{"http://example.com/shop/list.php?cat=7", "list.php?page=2&sort=price&cat=7"},
	{"http://example.com/shop/list.php?cat=7", "./a/b/../../c/./d.html"},
	{"http://example.com/shop/list.php?cat=7", "/search?q=hello+world&lang=en"},
	{"http://example.com/shop/list.php?cat=7", "/path/with%7etilde/and%2fslash/%c3%a9t%c3%a9"},
	{"http://example.com/shop/list.php?cat=7", "cart;jsessionid=0A1B2C3D4E5F"},
	{"http://example.com/shop/list.php?cat=7", "mailto:shop@example.com"},
	{"http://example.com/shop/list.php?cat=7", "javascript:void(0)"},
	{"http://example.com/shop/list.php?cat=7", "http://Example.COM:80/shop/"},
	{"http://example.com/shop/list.php?cat=7", "https://bücher.example/straße"},
	{"http://example.com/shop/list.php?cat=7", "?cat=8"},
	{"http://example.com/shop/list.php?cat=7", "http://example.com/shop/list.php?cat=8"},
}

// benchAbsolute is benchLinks resolved by net/url: the input of URL.
func benchAbsolute(tb testing.TB) []string {
	tb.Helper()
	var abs []string
	for _, l := range benchLinks {
		base, err := url.Parse(l.page)
		if err != nil {
			tb.Fatal(err)
		}
		u, err := base.Parse(l.ref)
		if err != nil {
			tb.Fatal(err)
		}
		abs = append(abs, u.String())
	}
	return abs
}

func BenchmarkURL(b *testing.B) {
	n, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	abs := benchAbsolute(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = n.URL(abs[i%len(abs)])
	}
}

func BenchmarkResolve(b *testing.B) {
	n, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := benchLinks[i%len(benchLinks)]
		_, _ = n.Resolve(l.page, l.ref)
	}
}

// BenchmarkURLCanonical is the fast path: the input is already canonical.
func BenchmarkURLCanonical(b *testing.B) {
	n, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	var canon []string
	for _, a := range benchAbsolute(b) {
		if c, err := n.URL(a); err == nil {
			canon = append(canon, c)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = n.URL(canon[i%len(canon)])
	}
}

// BenchmarkVersusPurell measures Sieve and purell alone in the same run, in
// alternating rounds so that a busy machine slows both alike, and reports
// URLs/s per core, allocations per URL and the ratio Sieve/purell.
//   - URL: n.URL against purell.NormalizeURLString(u, purellFlags) on the
//     absolute forms of benchLinks.
//   - Resolve: n.Resolve(page, ref) against what a crawler does with purell:
//     url.Parse(page), base.Parse(ref), purell.NormalizeURL(u, purellFlags).
func BenchmarkVersusPurell(b *testing.B) {
	n, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	abs := benchAbsolute(b)
	b.Run("URL", func(b *testing.B) {
		compare(b, len(abs),
			func(i int) { _, _ = n.URL(abs[i]) },
			func(i int) { _, _ = purell.NormalizeURLString(abs[i], purellFlags) })
	})
	b.Run("Resolve", func(b *testing.B) {
		compare(b, len(benchLinks),
			func(i int) { _, _ = n.Resolve(benchLinks[i].page, benchLinks[i].ref) },
			func(i int) {
				base, err := url.Parse(benchLinks[i].page)
				if err != nil {
					return
				}
				u, err := base.Parse(benchLinks[i].ref)
				if err != nil {
					return
				}
				_ = purell.NormalizeURL(u, purellFlags)
			})
	})
}

// compare runs sieve and baseline over inputs 0..size-1, b.N URLs each,
// and reports both rates, allocations and their ratio.
func compare(b *testing.B, size int, sieve, baseline func(i int)) {
	b.Helper()
	var tSieve, tBase time.Duration
	round := func(f func(int), count int) time.Duration {
		start := time.Now()
		for i := 0; i < count; i++ {
			f(i % size)
		}
		return time.Since(start)
	}
	const chunk = 4096
	for done := 0; done < b.N; done += chunk {
		c := min(chunk, b.N-done)
		tSieve += round(sieve, c)
		tBase += round(baseline, c)
	}
	allocs := func(f func(int)) float64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < size*10; i++ {
			f(i % size)
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / float64(size*10)
	}
	rSieve := float64(b.N) / tSieve.Seconds()
	rBase := float64(b.N) / tBase.Seconds()
	b.ReportMetric(rSieve, "sieve-URLs/s")
	b.ReportMetric(rBase, "purell-URLs/s")
	b.ReportMetric(rSieve/rBase, "x-purell")
	b.ReportMetric(allocs(sieve), "sieve-allocs/URL")
	b.ReportMetric(allocs(baseline), "purell-allocs/URL")
}

// Package sitemap parses the sitemaps a site lists in its robots.txt, so that
// a crawler can take their URLs (and when each page last changed) without
// discovering them link by link. It is a leaf: it reads an io.Reader and
// knows nothing of HTTP, NATS or the frontier.
//
// # Formats
//
// Parse reads one file in any of the forms of the protocol
// (https://www.sitemaps.org/protocol.html) and tells the caller which it was
// (Result.Kind, Entry.Kind):
//
//   - KindURLSet, XML: <urlset><url><loc>…</loc><lastmod>…</lastmod></url>…</urlset>.
//   - KindIndex, XML: <sitemapindex><sitemap><loc>…</loc><lastmod>…</lastmod></sitemap>…</sitemapindex>;
//     each loc is a child sitemap for the caller to fetch and parse in turn.
//     The caller bounds the depth (an index listing indexes), since each
//     level is a separate fetch.
//   - KindText: one URL per line, UTF-8, nothing else.
//
// Any of them may be gzip-compressed: the gzip magic bytes (1f 8b) say so,
// never the file name (servers send .xml.gz decoded and .xml compressed); up
// to two gzip layers are taken off. After a UTF-8 byte order mark and white
// space, '<' means XML and anything else text; a text document whose first
// line is not an http(s) URL is not a sitemap.
//
// The XML is read as it is found on the web, not as the schema wants it:
// elements match by local name in any namespace or none (sites omit or
// misspell the xmlns); unknown elements (changefreq, priority, image:,
// video:, xhtml:link) are ignored, and only a <loc> directly inside a
// <url> counts, so an image:loc is never taken for a page; a raw "&" or an
// unknown entity in a loc is kept as text, and an end tag closes its element
// whatever its case, rather than losing the file; a document declared
// ISO-8859-1 or windows-1252 is converted to UTF-8, and in one that claims
// UTF-8 a byte that is not is read as ISO-8859-1, where encoding/xml would
// stop. Entities are decoded and white space around a loc is trimmed. An end
// tag that closes no open element stops the parse (ReasonMalformedXML)
// rather than be guessed at: encoding/xml's lenient mode would close the root
// there and drop the rest in silence. Feeds (RSS, Atom), which the protocol
// also accepts, are not read: ReasonNotSitemap.
//
// A loc is kept when it is at most Limits.MaxURLLength bytes of UTF-8 and an
// absolute http or https URL with a host; any other entry (no loc, a relative
// or javascript: loc, a loc of 5,000 bytes) is skipped and counted in
// Result.Skipped (ReasonBadURL), never fatal. A lastmod is kept as given
// (Entry.LastMod) and, when it is a W3C datetime as the protocol requires,
// parsed (Entry.LastModTime).
//
// The protocol's rule that a sitemap lists URLs of its own host (or of the
// host whose robots.txt referenced it) is Allowed, applied by the caller,
// which alone knows where a document came from.
//
// # Limits and streaming
//
// Parse holds one entry at a time: the XML is read token by token
// (encoding/xml's Decoder.RawToken), the text line by line, and each entry is
// handed to the caller's yield function as soon as it ends. What it holds is
// bounded whatever the input:
//
//   - Limits.MaxURLs entries per file (default 50,000, the protocol's);
//     entry 50,001, valid or not, stops the parse with ReasonTooManyURLs.
//   - Limits.MaxBytes bytes per file, counted both before and after gzip
//     (default 50 MiB, the protocol's uncompressed limit); one byte more stops
//     it with ReasonTooLarge, so a gzip bomb is decompressed only up to the
//     limit.
//   - one XML token (a text run, a comment, a tag with its attributes) of at
//     most 1 MiB, since the decoder buffers a whole token; and element
//     nesting of at most 64 levels, the stack of open elements Parse keeps.
//   - one text line of at most twice Limits.MaxURLLength (at least 4 KiB);
//     a longer one is read through and skipped.
//
// # Errors
//
// Bad input is never fatal to the caller and never panics (FuzzParse checks
// it): Parse stops with an *Error whose Reason is one of a small set of
// metrics labels (Reasons), and the entries it yielded before stay valid
// (a truncated sitemap still gives its first URLs). ReasonRead is the
// reader's own failure, not the document's.
package sitemap

// Package warc keeps what a crawl fetches in WARC/1.1 files (ISO 28500),
// the format Heritrix, StormCrawler, Browsertrix and the Internet Archive's
// tools write and read, with a CDXJ index beside each file.
//
// # Capturing the exchange
//
// A Recorder has two halves installed in an HTTP/1.1 transport: WrapConn
// wraps every connection (after the crawler's address guard dialled it and
// after any TLS handshake), RoundTripper wraps the round trip. The round
// trip learns which connection carries its request from httptrace's
// GotConn and attaches its exchange to it; from then on every byte written
// to the connection is the request and every byte read is the response, as
// they crossed the wire: status line, headers, and the body as received,
// transfer and content codings kept. net/http's HTTP/1.1 transport runs one
// exchange at a time per connection and sends the next request only after
// the previous response was read, so the attribution is exact. The
// response body handed to the caller records the exchange when it is read
// to its end or closed; closed early, the rest is read first (up to
// MaxBodySize, beyond which the record is marked WARC-Truncated: length),
// so a record always holds what the server sent. Both sides are spooled in
// memory up to SpoolMemory and in a temporary file beyond: a large body
// costs disk, not memory.
//
// # Records and files
//
// Each exchange becomes a response record and a request record linked both
// ways by WARC-Concurrent-To, with WARC-Target-URI, WARC-Date (when the
// request was sent), WARC-IP-Address, WARC-Block-Digest over the block as
// received and WARC-Payload-Digest over the body with its chunked transfer
// coding removed (content codings stay: they are the payload). Digests are
// sha1 in base32. A truncated response has no payload digest. Records are
// built with github.com/nlnwa/gowarc/v3, each written as its own gzip
// member, so a reader can seek to any record (the CDXJ offsets).
//
// A Writer begins a file with a warcinfo record, names it
// <prefix>-<17-digit UTC time>-<serial>-<crawler id>.warc.gz, writes it as
// <name>.open while holding an exclusive flock on it, and renames it when
// it closes (at MaxFileSize, default 1 GB, or Close). The index lines of
// its responses and revisits go to <name>.cdxj.open as records are written
// and are sorted into <name>.cdxj when the file closes: the CDXJ of pywb
// and Browsertrix (SURT key, 14-digit time, JSON with url, mime, status,
// digest, length, offset, filename), equal to what webrecorder's warcio
// cdx-index makes of the file.
//
// # Nothing lost
//
// A record is handed to the operating system before the exchange's outcome
// reaches the caller (the Tracker a fetch carries in its context), so a
// crawler acknowledges a page only after its records are in the file. A
// write that fails is cut back from the file and fails the Writer for good:
// the Recorder refuses every later request, so nothing is fetched that
// cannot be kept. A process killed mid-file leaves <name>.open unlocked;
// Open (and Recover) find such files, cut each after its last complete
// record (a gzip member with a valid checksum holding a whole record),
// rename and index them.
//
// # Revisits
//
// Given a Captures store (the last capture of every URL and the first of
// every payload digest, per crawl), the Recorder asks for a page
// conditionally (If-None-Match, If-Modified-Since from the last capture)
// and writes a revisit record instead of a response when the server
// answers 304 (profile server-not-modified) or the payload is one the crawl
// already holds, under this URL or another (identical-payload-digest). A
// revisit record's block is the response's header only, with
// WARC-Refers-To-Target-URI and WARC-Refers-To-Date naming the record that
// holds the payload.
//
// # An archive is a set of directories
//
// A crawl may write each run into a new directory and still revisit
// against what earlier runs kept. A capture names the file holding its
// payload by the name the file has once closed (never <name>.open) and the
// offset of the record; file names are unique, so the Recorder finds the
// file by looking in its own directory, then in every directory the crawl
// has written (Directories: the crawler keeps them in the crawl's record).
// A file still named <name>.open that no writer holds (its writer was
// killed) is closed on the way, as Open closes its own directory's.
//
// Before a request is made conditional, the record the last capture points
// at is read whole: a response record whose gzip member ends with a valid
// checksum and whose payload has the capture's digest. A record that
// cannot be read (the file moved, deleted, corrupt, on a disk not mounted)
// is never referred to: the request goes out unconditional, the response
// is stored whole, the new capture points at it, and the Result says why
// (Refetch, an *UnreadableError naming the path and a reason), for the
// crawler to count. A payload another URL holds is checked the same way
// before a revisit points at it.
package warc

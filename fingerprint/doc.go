// Package fingerprint condenses a fetched HTML page into evidence that
// tells whether two URLs serve the same page. Of reads the body once, as
// golang.org/x/net/html's Tokenizer splits it into tokens (no tree), and
// returns a Print; Digest is the part of it that applies to any body. All
// functions are pure and safe for concurrent use; a Print owns its Blocks.
//
// # What each field is evidence of
//
// The fields go from strict to loose, and each says something different:
//
//   - Digest: the bodies are byte-identical. It is the SHA-1 in base32 that
//     WARC writers put in WARC-Payload-Digest, so a revisit record can cite
//     it. One changed byte (a nonce, a session id in a link, a build
//     number in a comment) makes it differ.
//   - Text: the pages show the same text. Markup is ignored: links carrying
//     a session id, scripts, styles, comments, attributes, whitespace and
//     case may all differ and Text is still equal. Text is a 64-bit hash,
//     so equal text means equal Text, and unequal text gives equal Text with
//     probability about 2⁻⁶⁴. It does not see what is not text: two pages
//     that differ only in their links' targets or their images have equal
//     Text.
//   - SimHash: the pages' texts are near-duplicates: Distance(a, b) is small.
//     On generated pages of 300–1000 words (TestSimHashStatistics): pages
//     with unrelated text are at distance 32 on average (31.9 measured over
//     2,000 pairs, none below 17), a copy with one word in 300 replaced at
//     2.8 on average, 99.4% of such pairs at 7 or less and 99.99% at 10 or
//     less. (Manku et al. use distance ≤ 3 for 64-bit fingerprints; here
//     that would accept only 70% of one-in-300 edits.)
//   - Blocks: which parts of the text differ. Changed(a, b) lists the Paths
//     of the blocks whose text differs. A block's Path is its place in the
//     page's markup, not its text, so the same template rendered twice gives
//     the same Paths and only the Texts of the blocks that carry a clock, a
//     counter or a rotating teaser change. A caller can fetch a page twice to
//     learn that render-to-render noise (the Paths Changed names between two
//     fetches of one URL), and then judge a difference between two URLs
//     against it: a difference inside the noise is no difference.
//   - Canonical: what the page says its own URL is. It is a claim, not
//     evidence, and it is returned raw, for the caller to resolve.
//
// # Visible text
//
// Of walks the tokens and keeps a stack of the open elements. The content
// of script, style, noscript, template and svg is skipped, and so is that
// of iframe, noembed and noframes (raw text no browser shows); so are
// comments, doctypes and attributes (alt text too). An HTML element inside
// <svg> ends it, as in HTML's foreign-content rules, so an unclosed icon does
// not swallow the rest of the page. The <title> is text. Text is taken as
// UTF-8: a page in another encoding keeps its ASCII letters and its other
// bytes verbatim, which then never form words. CSS (display: none) and the
// hidden attribute are not considered.
//
// The stack tolerates malformed HTML: void elements (img, br, hr, meta, link,
// input, …) are never pushed; an end tag closes the innermost open element
// of its name and everything opened inside it, and one that matches nothing
// is ignored; </body> and </html> close nothing, as in browsers; and the
// common implied end tags are applied (a <p> closed by a block, an <li> by
// the next <li>, cells, rows, table sections, options, a heading directly
// inside a heading), stopping about where HTML's scopes stop. A self-closing
// slash on an HTML element is ignored, as browsers ignore it. The stack is
// at most 256 deep: past that, start tags are counted instead of pushed and
// end tags count down first, so hostile nesting costs no memory.
//
// # Blocks
//
// The block elements are address article aside blockquote body caption
// center details dialog dir dd div dl dt fieldset figcaption figure footer
// form h1–h6 header hgroup hr legend li main menu nav ol option p pre search
// section summary table tbody td tfoot th thead title tr ul: the block
// elements of HTML's rendering section, with the cells, rows and options a
// browser lays out apart. Every start or end tag of one ends the current run
// of text, and the run is a block of the innermost block element open at
// that point (or of the root when none is). A <br> ends a line, not a block:
// it is a space. Inline elements join: "a<b>b</b>c" is "abc".
//
// A block's text is normalized: Unicode lower case (unicode.ToLower, rune by
// rune), every run of white space (unicode.IsSpace, so also U+00A0) one
// space, trimmed; U+0000 is dropped, as browsers drop it. A block whose
// normalized text is empty is omitted, and does not count in ordinals.
//
// A block's place is the list of open elements from the root to its block
// element, each with its tag name and its id and class attributes as
// written, and the block's ordinal among the page's earlier blocks with the
// same list. Text never enters it. Two renders of one template therefore
// have the same Paths unless the template itself varies: an id or class
// generated per render (a React useId, "post-12345" from the URL) gives
// other Paths, and a block inserted before others with its place (a new
// list item, a paragraph that was empty) shifts their ordinals, so Changed
// names all of them.
//
// A page keeps at most MaxBlocks blocks; the text of the blocks after the
// last is folded into it (its Text hashes all of them, joined by spaces), so
// a change anywhere past it shows there.
//
// # SimHash
//
// The page's text is its blocks' normalized texts joined by single spaces.
// Its words are the maximal runs of Unicode letters, digits and combining
// marks (a decomposed "é" or a Devanagari vowel sign does not split a word;
// scripts written without spaces make long words). Its shingles are the runs
// of 3 consecutive words, n−2 of them for n ≥ 3 words; a page of 1 or 2
// words has one shingle of those. Each shingle, its words joined by single
// spaces, is hashed to 64 bits, and SimHash bit i is set when more shingle
// hashes have bit i set than not (Charikar's sum of +1 and −1 is positive).
// Two texts that share most shingles agree on most bits: the expected
// distance grows with the fraction of shingles that differ. A text with no
// words has SimHash 0.
//
// The per-bit counts are kept eight at a time: lane j of eight 64-bit words
// counts bits j, j+8, …, j+56 in its eight bytes, one add per lane per
// shingle, spilled into 64 wide counters every 255 shingles.
//
// # Hash formats
//
// Rules learned from Prints are stored, so these are a storage format,
// pinned by TestPinned and TestPathPinned:
//
//	Digest      "sha1:" + base32.StdEncoding(SHA-1(body))
//	Text        murmur3 x64_128, seed 0, first 64 bits (murmur3.Sum64) of
//	            the page's text; 0 when it is empty, 1 if the hash is 0
//	SimHash     as above, over murmur3.Sum64 of each shingle
//	Block.Text  murmur3 x86_32, seed 0 (murmur3.Sum32) of the block's text
//	Block.Path  FNV-1a 64 over, for each element from the root to the
//	            block's: tag 0x1f id 0x1f class 0x1e; then 0x1d and the
//	            ordinal as 4 bytes big-endian; folded to 32 bits by xoring
//	            its halves
//
// Tag names are lower case as the tokenizer returns them; an absent id or
// class is empty. Paths are 32 bits: two places in one page collide with
// probability about n²/2³³ for n blocks (8·10⁻⁶ at 256), and Changed then
// compares the colliding blocks' Texts as a set.
//
// # Cost
//
// On a generated 30 KB article page (92 blocks, 7.9 KB of text; a third of
// its bytes scripts and styles), Of takes about 0.25 ms and SHA-1 alone
// (Digest, which every fetch pays for its WARC record anyway) 0.025 ms: Of
// costs about 10 times its baseline (9.4–10.2 over three runs of TestOfCost
// with -sieve.fingerprintbench, each the median of 3 interleaved
// testing.Benchmark runs; Go 1.26, 2 shared Xeon cores at load average
// 4.5–5.7), with 3 allocations per page: the Blocks, the Digest and the
// Canonical. The x/net Tokenizer version before it cost 22–26 times its
// baseline and 2,068 allocations, alternated with it in the same runs.
//
// It gets there by not copying. Of does not run x/net's Tokenizer, which
// copies every tag name and attribute (bytes.Clone, bytes.Replace, a map of
// attribute names: 671 allocations on that page before any fingerprinting)
// and the body into its buffer: tokenizer.go follows its states over the
// body in place, notes only the id, class, rel and href values Of reads, and
// hands the rare tag or text that needs x/net's entity tables or attribute
// bookkeeping to x/net itself; TestTokenizer and FuzzOf check that it splits
// any body as x/net does. The scanner, its buffers and its hashes are reused
// from page to page (a sync.Pool), and each shingle is hashed where it lies
// in the text when it can be, without murmur3's digest.
package fingerprint

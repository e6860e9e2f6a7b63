// Package dust learns which spellings of a URL name one page from what a
// crawl fetches, and rewrites URLs so that a page is admitted once however
// its site spells it ("Do not crawl in the DUST": Bar-Yossef, Keidar,
// Schonfeld, WWW 2007 / TWEB 2009; Dasgupta et al., "De-duping URLs via
// rewrite rules", KDD 2008).
//
// Fixed canonicalization (package normalize) knows the spellings every
// site shares: fragments, default ports, utm_* parameters. It cannot know
// a session parameter one shop invents, that one server ignores letter
// case, or that a host mirrors another. A Learner watches the pages a
// crawler fetches (their fingerprints, package fingerprint): two URLs whose
// pages are the same propose the smallest set of rewrite rules (Kind) that
// spells both alike; the rules become active once enough pairs support
// them and none refutes them, and retire when a counterexample shows up
// later. A Set applies a crawl's active rules (Set.Key): dedup workers admit
// every discovered URL under its Key, and crawlers drop at fetch time a URL
// whose Key names a page already fetched.
//
// # The same page
//
// Exact: the payloads are identical. Near: the visible texts are (a
// session id lives in hrefs only), or the blocks of text that differ are
// blocks the host changes between two renders of one URL (a clock, a
// reader count, a rotating box). That render-to-render noise is measured by
// fetching a page a second time, only when a pair that rules could merge
// differs in blocks not yet seen changing, or staying in two pairs of
// renders (at most Options.Refetches per host); a page that differs in a
// block seen stable (a product in red and in blue, with its own price) is
// another page. See Learner.
//
// # Rules
//
// Per host: a query parameter that does not matter (param:NAME, any value
// or none), path letter case (case), an extension alias (ext:.htm), an
// index file (index:index.html), a trailing slash (slash), a segment
// repeated at once (dupseg), and a host that serves another's pages under
// the same paths (mirror:HOST; a mirror's pairs of spellings teach its
// target's rules, under which its URLs are spelled). A rule never rewrites
// what the crawler fetches: a URL is fetched as first found, and only its
// Key is the filter's, so a rule that merges two spellings never sends the
// crawler to a third that the server does not serve.
//
// # Records
//
// What a crawl learned about a host is a HostRules record (JSON, versioned
// by RecordVersion; a newer record is refused, never skipped), stored by
// package frontier in the bucket <PREFIX>_RULES and shared by every
// crawler and worker. Its Revision counts the changes of its active rules.
//
// # Cost
//
// A Learner remembers at most Options.MaxPages pages across a crawl's hosts
// (50,000): per page its URL, digest, text hash, SimHash and text blocks
// (8 bytes each, at most 64: the rest folded into one), and an entry in a
// few hash maps: about 870 B at 60 blocks a page (TestLearnerCost), so at
// most about 45 MB per crawl; past that bound pages are compared but not
// remembered, so RAM is bounded whatever the crawl's size, the same at
// 1 M and 20 M URLs. A Set is a few strings per host with active rules.
package dust

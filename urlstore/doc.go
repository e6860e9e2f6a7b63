// Package urlstore keeps per-URL records on disk, in bounded memory, shared
// by every process of a deployment: a local index in an embedded LSM
// (CockroachDB's Pebble) fed by a replicated log (a Log: the stream
// <PREFIX>_STORE, frontier.StoreLog).
//
// # The log is the truth, the index a cache of it
//
// A Store writes a Batch of changes (Set, SetIfAbsent, Delete,
// DeletePrefix) by appending it to one partition of the log, then applying
// it to its Pebble database; a follower applies every other writer's
// entries in log order. Every store that applies the same entries in the
// same order holds the same state, so:
//
//   - Appends are compare-and-append on the partition's last sequence
//     (JetStream's expected last subject sequence). A store appends only
//     when it has applied everything before in that partition; when
//     another writer got there first, it waits for its follower to apply
//     that entry and appends again. SetIfAbsent therefore has one winner
//     everywhere: the first in the log. A key must live in one partition
//     (the caller's choice, a hash of it), since partitions are ordered
//     apart.
//   - Each applied entry writes its partition's sequence in the same
//     Pebble batch as its changes, and the follower its own position, so
//     the index and the sequences never disagree. Pebble's writes are not
//     synced: the log holds every acknowledged entry (replicated, with
//     frontier.replicas), and an entry the machine's crash lost here is
//     applied again from it.
//   - Opening a store reads the sequences and resumes the follower after
//     its position: a restart applies what was written since, whatever the
//     size of the state (TestRestartReadsOnlyTheTail). A store opened in an
//     empty directory, as on a machine that lost its disk, rebuilds
//     everything from the log, reporting its progress, or, with
//     Options.Snapshots, restores the current snapshot and reads the
//     log's tail.
//   - The log is compacted (Compact): once a period, the entries below
//     the previous snapshot's points are trimmed, so the log holds about
//     two periods of work rather than every write ever made.
//   - An entry that does not decode is skipped by every store alike, and
//     counted (Stats.Bad); a write is checked before it is appended. An
//     entry of a newer format than this build's (LogFormat), or a value
//     its user says is newer (Options.CheckValue), is never skipped: the
//     store stops at it, unapplied (ErrNewerFormat), since every newer
//     store applied it. With Snapshots, the newest formats any build
//     opened (the log's and Options.Formats) are recorded in the
//     manifest, and an older build refuses to open a store, naming both
//     versions: the processes sharing a log are upgraded together.
//
// # Cost per record
//
// RAM is Pebble's block cache (Options.CacheBytes) and memtables, fixed
// sizes whatever the number of keys. On disk a record costs its key and
// value, compressed in Pebble's blocks, plus its log entry (compressed by
// its writer, not by the stream: after an unclean stop NATS rebuilds a
// stream from all its blocks, and decompressing them took seconds at 5 M
// URLs). internal/enginebench measured the choice of Pebble against
// bbolt and Redis; ARCHITECTURE.md has the figures.
//
// Stores hold their own data in one directory each (Pebble's lock keeps a
// second process out). MemLog is the in-memory Log for the tests of what
// sits on a store.
package urlstore

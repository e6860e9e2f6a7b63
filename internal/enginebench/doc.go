// Package enginebench measures the storage engines Sieve could keep its
// per-URL records in, so that the choice of engine is a measured one. It has
// no code of its own: it is the test TestEngineChoice, which runs only when
// asked, as it writes millions of records and takes minutes:
//
//	go test ./internal/enginebench -run TestEngineChoice -sieve.enginebench \
//		-sieve.enginebench.sizes 1000000,5000000 -v -timeout 60m
//
// # The record
//
// A per-URL record is what a crawl keeps about one URL between visits. Its
// key is 26 bytes, ordered for the scans a store serves: a 2-byte kind
// prefix, the 8-byte hash of the crawl and the 16-byte hash of the canonical
// URL. URL hashes look random, so records are inserted in random key order,
// the hard case for a B+tree and the one an LSM tree is built for. Its value
// is about 110 bytes of compact binary capture: a version byte, varints of
// the fetch and last-modified dates, the status and the content type, a
// 20-byte payload digest, a short ETag, the name of the WARC file holding the
// capture (shared by 10,000 records, as a file holds many) and the record's
// offset and length in it. Records are built deterministically from their
// index, so a run can regenerate any key to read it back.
//
// # The engines
//
//   - Pebble v2, the candidate: an LSM tree (CockroachDB's engine) with its
//     default options but for a 16 MiB block cache, and batches committed
//     without fsync (pebble.NoSync).
//   - bbolt, the baseline: a copy-on-write B+tree in one mmapped file, with
//     NoSync, one Update transaction per batch.
//   - Redis hash fields holding the same binary values, on a redis-server
//     the test starts: the records kept in RAM rather than on disk. It runs
//     only up to 1,000,000 records.
//
// # The figures
//
// For each size N and engine, records are written in batches of 1,000, and
// the test prints:
//
//   - insert rate: records per second over the whole insert loop, one
//     writer. Pebble's background compactions may still run afterwards; the
//     time to flush and compact everything is printed apart ("settle s"; it
//     includes two seconds of watching Pebble stay idle, see below).
//   - disk bytes per record: the sum of the sizes of the files in the
//     engine's directory, divided by N, after a flush and after a compaction
//     of the whole key range, each followed by a settle: Pebble has run no
//     flush or compaction for a second and has deleted every obsolete table.
//     Pebble's figures include its WAL files (kept for recycling: about
//     12 MB whatever N) and its MANIFEST; the test logs the sizes by file
//     kind. bbolt's file is what it is after the last Update: its size grows
//     in steps, so it includes free pages. The bytes allocated on disk after
//     compaction are printed too ("allocated"): bbolt's file may be sparse,
//     Pebble preallocates.
//   - RAM bytes per record: for the on-disk engines, the growth of the
//     process's anonymous resident memory (RssAnon in /proc/self/status)
//     from before the engine is opened to after the last insert and a
//     collection that returns freed heap to the OS (debug.FreeOSMemory),
//     divided by N. It includes fixed costs (Pebble's block cache and
//     memtables), so it falls as N grows. Pages of a file mapped into memory
//     (bbolt's data file) are page cache, which the kernel may drop; they are
//     reported apart as RssFile (the total at that point, not a growth).
//     For Redis, the growth of INFO memory's used_memory divided by N.
//   - reads per second: 100,000 point reads of random existing keys, one at
//     a time and each checked against the value written, after the flush
//     and compaction (the page cache warm, as after writing). For Redis each
//     read is one HGET round trip on loopback.
//
// Every figure is printed with the baseline (bbolt) measured in the same
// run and the ratio to it, so the ratio is the result: absolute figures
// depend on the machine and on what else it is doing.
package enginebench

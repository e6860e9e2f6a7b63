#!/usr/bin/env bash
# bench.sh runs Sieve's benchmarks: each prints its baseline, measured in the
# same run, and the ratio. They start their own redis-server and NATS, like
# the tests (run ./test.sh once first to install redis-server). Long: not CI.
#
#   ./bench.sh            every table
#   ./bench.sh NAME…      some of them: redis cuckoo bloom normalize pipeline crawl archive polite urlfrontier auth replicas engine captures compact dust soak
#
#   ./bench.sh scale [SIZE…]  the per-URL stores at sizes (default 1M 5M 20M)
#   ./bench.sh recovery [SIZE…]  crawler serve after a fill: RSS and restarts (default 1M 20M)
#   ./bench.sh broad [SHAPES]  crawler serve on broad-crawl shapes: many queues, one long queue (default q20k,q1M,one1M)
#
# soak is not a benchmark and not in the default list: it runs 300,000 URLs
# through a 3-node NATS cluster and a Redis Cluster while killing a NATS
# node, a Redis master and a worker, and prints what each cost.
set -euo pipefail
cd "$(dirname "$0")"
export CI=true # a missing redis-server fails instead of skipping

run() { echo; echo "### $1"; shift; echo "+ $*"; "$@"; }

redis()     { run "Redis filters: Sieve vs its layout-1 script vs native BITFIELD vs SADD(SHA-1), 1 and 2 clients, streams (a) and (b), median of 3, with the issue-13 goals" \
                go test ./dedup -count=1 -run '^TestRedisFilterStreams$' -sieve.redisbench -v -timeout 90m; }
cuckoo()    { run "Cuckoo vs Bloom, in memory and on Redis, at 1% and 0.1%" \
                go test ./dedup -count=1 -run '^TestCuckooBench$' -sieve.cuckoobench -v -timeout 60m; }
bloom()     { run "In-memory Bloom vs bits-and-blooms and a Go map" \
                go test ./dedup -count=1 -run '^$' -bench 'Bloom' -benchmem -timeout 30m; }
normalize() { run "normalize vs purell alone" \
                go test ./normalize -count=1 -run '^$' -bench . -benchmem -timeout 30m; }
pipeline()  { run "Pipeline: NATS in → normalize → filter → NATS out, vs normalize-only and filter-only" \
                go test ./frontier -count=1 -run '^TestPipelineThroughput$' -sieve.pipelinebench -v -timeout 60m; }
crawl()     { run "One site, no delay, Sieve's embedded mode (crawler run --embedded) vs a colly program, each a process of its own, pairs alternating, medians of 3, at 1 and 4 requests at a time: the demo site, and PostgreSQL's and Python's documentation (Debian's postgresql-doc-15 and python3.11-doc, where installed) served by python3 -m http.server: wall time ratio (goal ≤ 1.0) and CPU per response (goal ≤ 1.2)" \
                go test ./cmd/crawler -count=1 -run '^TestCrawlVsColly$' -sieve.collybench -v -timeout 60m
              run "A page's links from the crawler to the frontier, one page at a time: deployed (discovered stream over TCP, a dedup worker, its filter in redis-server or in memory) vs embedded (AdmitPage, the baseline): median and p90" \
                go test ./frontier -count=1 -run '^TestPageLatency$' -sieve.latencybench -v -timeout 10m
              run "Crawl of a generated 5,000-page trap site, in process: Sieve (NATS + dedup worker + crawler) vs plain colly, 16 at a time" \
                go test ./crawl -count=1 -run '^$' -bench 'CrawlVsColly' -benchtime 1x -v -timeout 60m; }
dust()      { run "One page, one fetch: the DUST web (testsite.StartDust: six hosts that spell each page many ways, a control host of distinct look-alikes) crawled embedded with learning off (the baseline, capped at 15,000 fetches) and on, alternating, 3 times each: fetches per distinct page, pages lost, duplicates, spellings dropped, second renders" \
                go test ./cmd/crawler -count=1 -run '^TestDustBench$' -sieve.dustbench -v -timeout 60m
              run "One page, one fetch: a Learner's bytes per remembered page (vs the fingerprints alone) and time per page observed, at 10,000, 50,000 (its ceiling) and 100,000 pages" \
                go test ./dust -count=1 -run '^TestLearnerCost$' -sieve.dustcost -v -timeout 30m; }
archive()   { run "Crawl of the 5,000-page test site with and without a WARC archive, alternating, medians of 3: time ratio (goal ≤ 1.1) and peak heap" \
                go test ./crawl -count=1 -run '^$' -bench 'ArchiveCost' -benchtime 1x -v -timeout 60m; }
replicas()  { run "redis.wait_replicas: the pipeline on a Redis Cluster (3 masters + 1 replica each) without and with the wait, median of 3" \
                go test ./frontier -count=1 -run '^TestWaitReplicasCost$' -sieve.waitbench -v -timeout 60m; }
soak()      { run "Soak: 300,000 URLs, 3 workers, 2 crawlers, NATS cluster R3 + Redis Cluster 3+3, a NATS node, a Redis master and a worker killed in turn" \
                go test ./frontier -count=1 -run '^TestSoak$' -sieve.soak -v -timeout 90m; }
polite()    { run "Polite crawl of 100 and 1,000 hosts + one with a 10,000-URL backlog, defaults: fetches/s vs the hosts' limits and a ticker baseline" \
                go test ./crawl -count=1 -run '^TestPoliteThroughput$' -sieve.politebench -v -timeout 60m; }
urlfrontier() { run "URLFrontier: PutDiscovered ingest vs the NATS-native discovered path; GetURLs hand-out (1,000 queues) vs a JetStream pull; medians of 3" \
                go test ./urlfrontier -count=1 -run '^TestURLFrontierThroughput$' -sieve.urlfrontierbench -v -timeout 60m; }

auth()     { run "URLFrontier API: PutDiscovered ingest with TLS, a client CA and a token vs plain text, alternating, medians of 5 (goal ≥ 0.85 × plain)" \
                go test ./cmd/crawler -count=1 -run '^TestAuthIngestCost$' -sieve.authbench -v -timeout 10m; }

engine()  { run "Engines for per-URL records: Pebble vs bbolt (baseline) vs Redis hash fields, 1 M and 5 M records: inserts/s, disk and RAM per record, reads/s" \
                go test ./internal/enginebench -count=1 -run '^TestEngineChoice$' -sieve.enginebench -sieve.enginebench.sizes 1000000,5000000 -v -timeout 90m; }

captures() { run "Captures on disk (Pebble + the NATS log, embedded server in process) vs Redis JSON hashes: puts/s, RSS, disk and log bytes per URL, reopen time, lookups/s; sizes: SIEVE_CAPTURES_SIZES (default 1000000)" \
                go test ./captures -count=1 -run '^TestCaptureCost$' -sieve.capturesbench -sieve.capturesbench.sizes "${SIEVE_CAPTURES_SIZES:-1000000}" -v -timeout 120m; }

compact() { run "Compaction of a per-URL store's log: 1 M records rewritten each round, compacted each round vs not (baseline): log bytes, write rate, snapshot size and time, a new store restored vs rebuilt from the log" \
                go test ./frontier -count=1 -run '^TestCompactionCost$' -sieve.compactbench -sieve.compactbench.n "${SIEVE_COMPACT_N:-1000000}" -v -timeout 60m; }

# scale SIZE…: the per-URL stores at growing sizes (issue 26), each figure
# per URL so that a rising one shows: the captures' store (RSS of the store
# and its NATS server, Pebble's and the log's bytes, put and lookup rates,
# close and reopen times), the frontier stream's bytes per waiting URL
# with and without compression, and `crawler serve --embedded` measured from
# outside as a URLFrontier client sees it (PutDiscovered rate into 20,000
# queues, the process's RSS and data directory per queued URL, SIGTERM stop
# and restart and SIGKILL restart times until GetStats shows every URL, the
# GetURLs + known-update rate), and the dedup pipeline's admitted URLs/s at
# the size (one worker, its filter in redis-server, embedded NATS, the crawl
# created for the largest size; median of 3 rounds of 200,000 new URLs after
# a fill to the size, goal at 20 M: at least 0.9 × its rate at 1 M) with the fill's rate, the frontier's bytes
# and Redis's used_memory per URL and the process's RSS; its frontier keeps
# message IDs for 1 minute, not 10. Sizes accept k and M: ./bench.sh scale 1M 5M 20M.
# Once per run, after the sizes: broad at q20k,q1M,one1M (serve's queues).
scale() {
	local sizes=("$@")
	[ ${#sizes[@]} -gt 0 ] || sizes=(1M 5M 20M)
	local n base
	for size in "${sizes[@]}"; do
		n="${size//k/000}"
		n="${n//M/000000}"
		# serve and the pipeline measure 1 M in the same run as the size: the
		# baseline of their ratios.
		base=""
		[ "$n" = 1000000 ] || base="1000000,"
		run "Scale, $size URLs: captures on disk (store + its NATS in one process), vs Redis at 200,000" \
			go test ./captures -count=1 -run '^TestCaptureCost$' -sieve.capturesbench -sieve.capturesbench.sizes "$n" -v -timeout 120m
		run "Scale, $size URLs: frontier stream bytes per waiting URL, S2 vs uncompressed" \
			go test ./frontier -count=1 -run '^TestFrontierStreamBytes$' -sieve.streambytes.n "$n" -v -timeout 120m
		run "Scale, $size URLs: crawler serve (URLFrontier) as a subprocess: PutDiscovered/s, RSS and disk per URL, SIGTERM and SIGKILL restart times, GetURLs+known/s" \
			go test ./cmd/crawler -count=1 -run '^TestServeScale$' -sieve.servebench -sieve.servebench.sizes "$base$n" -v -timeout 120m
		run "Scale, $size URLs: the dedup pipeline's admitted URLs/s at size (Redis filter, embedded NATS)" \
			go test ./frontier -count=1 -run '^TestPipelineScale$' -sieve.pipelinescale -sieve.pipelinescale.sizes "$base$n" -v -timeout 120m
	done
	broad q20k,q1M,one1M
}

# recovery SIZE…: `crawler serve --embedded` after a fill, as an operator
# meets it (issue 39), for a PutDiscovered and a PutURLs-with-metadata fill
# into 20,000 queues: RSS 1 s and 60 s after the fill, a SIGKILL at once
# and the start after it timed until GetURLs hands a URL out and until
# GetStats counts every URL, RSS at rest (after a further fill of 1 %), a
# SIGTERM and the start after it. Every size is one run, ratios to the first
# size (1 M unless asked otherwise: the same-run baseline); with
# SIEVE_RECOVERY_BASELINE=path/to/crawler (a build of an earlier commit),
# that binary is measured first at every size and fill, each ratio to it.
# SIEVE_RECOVERY_FILLS: discovered, urls or both (default).
recovery() {
	local sizes=("$@")
	[ ${#sizes[@]} -gt 0 ] || sizes=(1M 20M)
	local list
	list=$(IFS=,; echo "${sizes[*]}")
	run "crawler serve after a fill: RSS right after, 60 s after and at rest; restart after SIGKILL and after SIGTERM until GetURLs hands a URL out and GetStats counts every URL ($list)" \
		go test ./cmd/crawler -count=1 -run '^TestServeRecovery$' -sieve.serverecovery -sieve.serverecovery.sizes "$list" \
		-sieve.serverecovery.fills "${SIEVE_RECOVERY_FILLS:-discovered,urls}" -sieve.serverecovery.baseline "${SIEVE_RECOVERY_BASELINE:-}" -v -timeout 360m
}

# broad SHAPES: `crawler serve --embedded` on the shapes of a broad crawl
# (issue 40): q20k, the baseline, 1 M URLs over 20,000 queues; qN, N queues
# of one URL each (q1M, q10M); oneN, one queue of N URLs (one1M). Per shape
# on a fresh server: the PutURLs fill's rate, RSS less the empty server's
# per queue and per URL 1 s and 60 s after the fill, then medians of 3
# rounds of GetURLs latency (30 calls of 100 queues × 1 URL), ListQueues,
# GetStats and CountURLs, the GetURLs + known-update rate, and on oneN one
# GetURLs with no limit. Ratios to the q20k row; with
# SIEVE_BROAD_BASELINE=path/to/crawler (a build of an earlier commit),
# that binary is measured first at every shape, and ratios to it printed.
# Shapes as one comma list or several arguments: ./bench.sh broad q1M,q10M.
broad() {
	local shapes=("$@")
	[ ${#shapes[@]} -gt 0 ] || shapes=(q20k,q1M,one1M)
	local list
	list=$(IFS=,; echo "${shapes[*]}")
	run "crawler serve on broad-crawl shapes: fill rate, RSS per queue 1 s and 60 s after the fill, GetURLs latency, hand-out+ack rate, ListQueues, GetStats and CountURLs latency ($list)" \
		go test ./cmd/crawler -count=1 -run '^TestServeBroad$' -sieve.servebroad -sieve.servebroad.shapes "$list" \
		-sieve.servebroad.baseline "${SIEVE_BROAD_BASELINE:-}" -v -timeout 360m
}

names=("$@")
if [ "${names[0]:-}" = broad ]; then
	broad "${names[@]:1}"
	exit
fi
if [ "${names[0]:-}" = recovery ]; then
	recovery "${names[@]:1}"
	exit
fi
if [ "${names[0]:-}" = scale ]; then
	scale "${names[@]:1}"
	exit
fi
[ ${#names[@]} -gt 0 ] || names=(bloom normalize cuckoo redis pipeline replicas crawl dust archive polite urlfrontier auth engine captures compact)
for n in "${names[@]}"; do
	case "$n" in
	redis|cuckoo|bloom|normalize|pipeline|replicas|soak|crawl|dust|archive|polite|urlfrontier|auth|engine|captures|compact) "$n" ;;
	*) echo "bench.sh: unknown benchmark $n (redis cuckoo bloom normalize pipeline replicas soak crawl dust archive polite urlfrontier auth engine captures compact)" >&2; exit 2 ;;
	esac
done

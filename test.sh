#!/usr/bin/env bash
# test.sh runs every Sieve test against real servers, installing what the tests
# need on a fresh Debian machine first. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")"

have() { command -v "$1" >/dev/null 2>&1; }

# install WHAT PACKAGE…: installs Debian packages (as root with apt-get), or
# stops saying what to install.
install() {
	local what="$1"
	shift
	if [ "$(id -u)" = 0 ] && have apt-get; then
		echo "test.sh: installing $* with apt-get"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
	else
		echo "test.sh: $what is missing; install it (Debian/Ubuntu: sudo apt-get install $*)" >&2
		exit 1
	fi
}

if ! have go; then
	echo "test.sh: Go is not installed; install Go 1.26 or newer (https://go.dev/doc/install)" >&2
	exit 1
fi

# The tests start their own redis-server processes (single and cluster) on
# free loopback ports, so they need the binaries, never a running server.
if ! have redis-server || ! have redis-cli; then
	install redis-server redis-server redis-tools
fi

# The server-version tests run an installed nats-server (Debian's is 2.9,
# older than Sieve's minimum, 2.10) to check that it is refused; the other
# NATS tests use the embedded server. Debian installs it in /usr/sbin.
if ! have nats-server && [ ! -x /usr/sbin/nats-server ]; then
	install nats-server nats-server
	# The package starts a system service; the tests need only the binary.
	if have systemctl; then systemctl disable --now nats-server >/dev/null 2>&1 || true; fi
fi

# The live page's browser tests (watch/) drive headless Chromium.
if ! have chromium && ! have chromium-browser && ! have google-chrome; then
	install chromium chromium
fi

# WARC files are checked by tools nobody here wrote: the Internet Archive's
# `warc verify` (Go module proxy, built by exact version in a scratch module)
# and webrecorder's `warcio` (npm). Both go to a cache outside the checkout.
export SIEVE_TOOLS="${SIEVE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/sieve-tools}"
mkdir -p "$SIEVE_TOOLS/bin"
if [ ! -x "$SIEVE_TOOLS/bin/ia-warc" ]; then
	echo "test.sh: building the Internet Archive's warc tool (gowarc v0.8.96)"
	scratch="$(mktemp -d)"
	(cd "$scratch" && go mod init scratch >/dev/null 2>&1 &&
		GOFLAGS=-mod=mod go get github.com/internetarchive/gowarc@v0.8.96 >/dev/null 2>&1 &&
		GOFLAGS=-mod=mod go build -o "$SIEVE_TOOLS/bin/ia-warc" github.com/internetarchive/gowarc/cmd/warc)
	rm -rf "$scratch"
fi
if [ ! -x "$SIEVE_TOOLS/node_modules/.bin/warcio" ]; then
	have npm || install npm npm
	echo "test.sh: installing warcio 2.4.11 with npm"
	npm install --silent --no-audit --no-fund --prefix "$SIEVE_TOOLS" warcio@2.4.11 >/dev/null
fi

# A missing service must fail the run, never skip it.
export CI=true

go vet ./...
go test -count=1 -timeout 25m ./...

# Every fuzz target for a short budget on top of its saved corpus (which the
# plain test run above already replays): the URL parser longest, then each
# decoder of untrusted bytes (snapshots, revisit-window files, Guava streams, pipeline messages,
# crawled pages, Retry-After headers, sitemaps).
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "$3" "./$1"; }
fuzz normalize FuzzURL 20s
fuzz dedup FuzzReadGuava 5s
fuzz dedup FuzzDecodeSnapshot 5s
fuzz dedup FuzzReadCuckoo 5s
fuzz dedup FuzzReadWindow 5s
fuzz frontier FuzzDecodeDiscovered 5s
fuzz frontier FuzzDecodeEntry 5s
fuzz frontier FuzzDecodeFetched 5s
fuzz warc FuzzScan 5s
fuzz crawl FuzzFetchLinks 5s
fuzz crawl FuzzRetryAfter 5s
fuzz sitemap FuzzParse 5s

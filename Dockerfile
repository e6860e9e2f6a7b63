# syntax=docker/dockerfile:1
# Sieve: one image with both programs, crawler and dedup-worker, built as
# static binaries. compose.yaml runs it; so can any container platform:
#   docker build -t sieve .
#   docker run --rm sieve crawler run --demo
FROM golang:1.26-alpine AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
# The golang image keeps modules in /go/pkg/mod (GOPATH /go) and, as root,
# its build cache in /root/.cache/go-build: the cache mounts must be there
# for builds to reuse them.
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/crawler ./cmd/crawler && \
    go build -ldflags="-s -w" -o /out/dedup-worker ./cmd/dedup-worker

# Alpine rather than scratch: its busybox wget serves the health checks, and
# its CA certificates let the crawler fetch https sites.
FROM alpine:3.22
RUN apk add --no-cache ca-certificates && adduser -D -u 10001 sieve && mkdir /data /warc && chown sieve /data /warc
COPY --from=build /out/crawler /out/dedup-worker /usr/local/bin/
USER sieve
WORKDIR /data
# The watch page and endpoints of both programs (/, /stats, /metrics, /healthz,
# /readyz): compose sets SIEVE_HTTP_ADDR=:8080 (the default is loopback only),
# over TLS and behind tokens that `crawler credentials` writes (docs/security.md).
EXPOSE 8080
CMD ["crawler", "--help"]

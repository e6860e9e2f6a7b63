#!/bin/sh
# gen.sh [OUT]: generates the Go code of urlfrontier.proto into OUT (default:
# this directory) with Debian's protoc and the generators go.mod pins as
# tools (protoc-gen-go, protoc-gen-go-grpc). Run from this directory.
set -eu
out=${1:-.}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	urlfrontier.proto

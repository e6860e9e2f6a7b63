// Package urlfrontierpb is the Go code protoc generates from
// urlfrontier.proto, Sieve's definition of the crawler-commons URLFrontier
// API 2.6: its messages and the URLFrontier service's client and server.
// Do not edit the *.pb.go files; edit the .proto and run
//
//	go generate ./urlfrontier/...
//
// which runs gen.sh: Debian's protoc (package protobuf-compiler; test.sh
// installs it) with protoc-gen-go and protoc-gen-go-grpc built at the
// versions go.mod pins as tools. TestGeneratedCurrent fails when the
// committed code is not what they make.
package urlfrontierpb

//go:generate sh gen.sh

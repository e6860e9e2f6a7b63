package urlfrontierpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCurrent regenerates the Go code from urlfrontier.proto and
// fails if it differs from the committed files: a .proto edited without
// `go generate`, or generators other than the pinned ones. Without protoc
// it skips, except under CI=true, where it fails.
func TestGeneratedCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("protoc not installed (apt-get install protobuf-compiler; test.sh does)")
		}
		t.Skip("protoc not installed (apt-get install protobuf-compiler)")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "gen.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	for _, f := range []string{"urlfrontier.pb.go", "urlfrontier_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what urlfrontier.proto generates: run go generate ./urlfrontier/...", f)
		}
	}
}

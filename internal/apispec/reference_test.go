package apispec_test

import (
	"bytes"
	"compress/gzip"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/payreq/payreq/docs"
	"github.com/payreq/payreq/internal/testing/needs"
)

var update = flag.Bool("update", false, "copy the pinned Redoc bundle into docs/redoc.standalone.js.gz (make api-docs)")

// The Redoc bundle the local stack serves at /docs is the one pinned in
// infra/local's package-lock.json. With -update (make api-docs) it is copied
// again.
func TestRedocBundleIsThePinnedOne(t *testing.T) {
	needs.External(t, "redoc from infra/local (npm ci)")
	pinned, err := os.ReadFile(filepath.Join(repoRoot(t), "infra/local/node_modules/redoc/bundles/redoc.standalone.js"))
	if err != nil {
		t.Fatalf("redoc is not installed: run `npm ci` in infra/local (make does it): %v", err)
	}
	if *update {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // no name, no mtime: reproducible
		_, _ = zw.Write(pinned)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repoRoot(t), "docs/redoc.standalone.js.gz"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(docs.PinnedRedocBundle(), pinned) {
		t.Fatal("docs/redoc.standalone.js.gz is not infra/local's pinned redoc bundle: run `make api-docs`")
	}
}

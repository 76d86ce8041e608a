package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
)

// The embedded gzip and brotli forms decompress to the current sources and rendered pages: run
// `go generate ./web` after editing one of Precompressed, index.html or a translation. No stray
// generated file is left behind either.
func TestCompressedUpToDate(t *testing.T) {
	sources := map[string][]byte{}
	for _, name := range Precompressed {
		sources[name] = read(t, name)
	}
	for _, lang := range Languages {
		page, err := CheckoutPage(lang)
		if err != nil {
			t.Fatal(err)
		}
		sources[PagePath(lang)] = page
	}
	for name, src := range sources {
		for enc, open := range map[string]func(io.Reader) (io.Reader, error){
			"gzip": func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
			"br":   func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil },
		} {
			b, ok := compressedFile(name, enc)
			if !ok {
				t.Errorf("%s: no %s form; run go generate ./web", name, enc)
				continue
			}
			r, err := open(bytes.NewReader(b))
			if err != nil {
				t.Errorf("%s (%s): %v", name, enc, err)
				continue
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, src) {
				t.Errorf("%s: the %s form is stale (err %v); run go generate ./web", name, enc, err)
			}
			if len(b) >= len(src) {
				t.Errorf("%s: %s form %d bytes, not smaller than %d", name, enc, len(b), len(src))
			}
		}
	}
	err := fs.WalkDir(compressed, "compressed", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "compressed/README.md" {
			return err
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(p, "compressed/"), ".gz"), ".br")
		if _, ok := sources[base]; !ok {
			t.Errorf("%s is not the form of a file in Precompressed or of a page", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every language has every key of English and nothing else, and its page renders.
func TestTranslationsComplete(t *testing.T) {
	en, err := Messages("en")
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range Languages {
		m, err := Messages(lang)
		if err != nil {
			t.Fatal(err)
		}
		for k := range en {
			if strings.TrimSpace(m[k]) == "" {
				t.Errorf("%s lacks %q", lang, k)
			}
		}
		for k := range m {
			if _, ok := en[k]; !ok {
				t.Errorf("%s has %q, which English lacks", lang, k)
			}
		}
		page, err := CheckoutPage(lang)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(page, []byte(`<html lang="`+lang+`" data-msg="{`)) || !bytes.Contains(page, []byte("<title>"+m["title"]+"</title>")) {
			t.Errorf("%s page does not start as expected: %.200s", lang, page)
		}
	}
}

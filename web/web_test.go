package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// Routes maps the URL paths that the checkout handler serves to files of Files. Assets referenced
// from the pages must resolve through it.
var routes = []struct{ prefix, dir string }{
	{"/checkout/assets/", "checkout/"},
	{"/demo/assets/", "demo/"},
	{"/paycheckout.js", "sdk/paycheckout.js"},
	{"/paycheckout.d.ts", "sdk/paycheckout.d.ts"},
	{"/favicon.ico", "favicon.ico"},
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(Files, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipSize(t *testing.T, b []byte) int {
	t.Helper()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Len()
}

func TestSizes(t *testing.T) {
	sdk := read(t, "sdk/paycheckout.js")
	n := gzipSize(t, sdk)
	t.Logf("sdk/paycheckout.js: %d bytes, %d bytes gzipped (limit 4096)", len(sdk), n)
	if n > 4096 {
		t.Errorf("paycheckout.js is %d bytes gzipped, over 4096", n)
	}

	// The hosted page as the browser downloads it: each file gzipped on its own, summed.
	total, raw := 0, 0
	for _, name := range []string{"checkout/index.html", "checkout/checkout.css", "checkout/checkout.js"} {
		b := read(t, name)
		if name == "checkout/index.html" {
			// As served: rendered, in its largest language.
			for _, lang := range Languages {
				p, err := CheckoutPage(lang)
				if err != nil {
					t.Fatal(err)
				}
				if len(p) > len(b) {
					b = p
				}
			}
		}
		g := gzipSize(t, b)
		t.Logf("%s: %d bytes, %d bytes gzipped", name, len(b), g)
		total += g
		raw += len(b)
	}
	t.Logf("hosted page HTML+CSS+JS: %d bytes, %d bytes gzipped (limit 61440)", raw, total)
	if total > 61440 {
		t.Errorf("hosted page is %d bytes gzipped, over 61440", total)
	}
}

var (
	inlineScript = regexp.MustCompile(`(?is)<script\b[^>]*>\s*[^<\s]`)
	scriptTag    = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	styleTag     = regexp.MustCompile(`(?i)<style\b`)
	styleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=`)
	handlerAttr  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	jsURL        = regexp.MustCompile(`(?i)javascript:`)
	unsafeJS     = regexp.MustCompile(`\beval\s*\(|new\s+Function\b|\bsetTimeout\s*\(\s*['"` + "`" + `]|\bsetInterval\s*\(\s*['"` + "`" + `]|\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|setAttribute\(\s*['"]style['"]|\.cssText\b|postMessage\([^)]*['"]\*['"]\s*\)`)
	assetRef     = regexp.MustCompile(`(?i)\s(?:src|href)="(/[^"]*)"`)
)

// The pages are served with script-src 'self' and style-src 'self': no inline code or styles.
func TestNoInlineCodeOrStyles(t *testing.T) {
	err := fs.WalkDir(Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b := string(read(t, name))
		switch {
		case strings.HasSuffix(name, ".html"):
			for what, re := range map[string]*regexp.Regexp{
				"inline <script>": inlineScript, "<style>": styleTag,
				"style attribute": styleAttr, "event handler attribute": handlerAttr, "javascript: URL": jsURL,
			} {
				if m := re.FindString(b); m != "" {
					t.Errorf("%s: %s: %q", name, what, m)
				}
			}
			for _, tag := range scriptTag.FindAllString(b, -1) {
				if !strings.Contains(tag, " src=") {
					t.Errorf("%s: <script> without src: %q", name, tag)
				}
			}
		case strings.HasSuffix(name, ".js"):
			if m := unsafeJS.FindString(b); m != "" {
				t.Errorf("%s: unsafe construct %q", name, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func resolve(path string) (string, bool) {
	for _, r := range routes {
		if strings.HasSuffix(r.prefix, "/") && strings.HasPrefix(path, r.prefix) {
			return r.dir + strings.TrimPrefix(path, r.prefix), true
		}
		if path == r.prefix {
			return r.dir, true
		}
	}
	return "", false
}

// Every asset a page references is in Files at the path the handler serves it from.
func TestReferencedAssetsExist(t *testing.T) {
	for _, page := range []string{"checkout/index.html", "checkout/acs.html", "demo/index.html"} {
		refs := assetRef.FindAllStringSubmatch(string(read(t, page)), -1)
		if len(refs) == 0 {
			t.Errorf("%s references no assets", page)
		}
		for _, m := range refs {
			name, ok := resolve(m[1])
			if !ok {
				t.Errorf("%s references %s, which no route serves", page, m[1])
				continue
			}
			if _, err := fs.Stat(Files, name); err != nil {
				t.Errorf("%s references %s: %v", page, m[1], err)
			}
		}
	}
}

func TestCardFieldsAutofillAndLabels(t *testing.T) {
	page := string(read(t, "checkout/index.html"))
	for _, want := range []string{
		`autocomplete="cc-name"`, `autocomplete="cc-number"`, `autocomplete="cc-exp"`, `autocomplete="cc-csc"`,
		`name="holderName"`, `name="number"`, `name="expiry"`, `name="cvc"`, `name="upiId"`,
		`role="tablist"`, `aria-live="polite"`, `role="alert"`, `type="submit"`, `id="gpay"`, `id="applepay"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	// Wallets are buttons: no shopper types a token.
	if strings.Contains(page, `name="token"`) {
		t.Error(`index.html has a typed wallet token field (name="token")`)
	}
	if n := strings.Count(page, `inputmode="numeric"`); n != 3 {
		t.Errorf("index.html has %d numeric inputs, want 3 (number, expiry, security code)", n)
	}
	// Every input has a label.
	ids := regexp.MustCompile(`<input id="([^"]+)"`).FindAllStringSubmatch(page, -1)
	for _, m := range ids {
		if !strings.Contains(page, `<label for="`+m[1]+`"`) {
			t.Errorf("input #%s has no <label for>", m[1])
		}
	}
	// The sandbox banner publishes the test data of docs/sandbox.md.
	for _, want := range []string{
		"4111 1111 1111 1111", "4000 0000 0000 0002", "4000 0000 0000 0119", "4000 0000 0000 0127",
		"4000 0000 0000 0069", "4000 0000 0000 3220", "4000 0084 0000 1629", "4000 0000 0000 3055",
		"success@upi", "failure@upi", "insufficient@upi", "timeout@upi", "invalid@upi",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("sandbox banner lacks %s", want)
		}
	}
}

func TestTypesCoverTheOptions(t *testing.T) {
	dts := string(read(t, "sdk/paycheckout.d.ts"))
	for _, want := range []string{
		"mode?: 'inline'", "mode: 'modal'", "paymentUrl: string", "containerId: string", "width?: string", "height?: string",
		"onSuccess?: (payload: SuccessPayload)", "onFailure?: (payload: FailurePayload)", "onCancel?: (payload: CancelPayload)",
		"onPending?: (payload: PendingPayload)", "onReady?: (payload: ReadyPayload)", "locale?: string",
		"function init(options: Options): void", "function destroy(): void", "PayCheckout: typeof PayCheckout",
	} {
		if !strings.Contains(dts, want) {
			t.Errorf("paycheckout.d.ts lacks %q", want)
		}
	}
}

// Package browsertest runs browser tests in a real headless Chromium (Debian's `chromium`) through
// chromedp, and has small helpers for them: evaluate JavaScript, wait for a JavaScript condition,
// evaluate inside a child frame, take a screenshot.
//
// A test that uses New fails, and does not skip, when Chromium is missing: install the Debian
// package `chromium`, or point CHROMIUM_PATH at a Chromium binary.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/internal/testing/needs"
)

// ChromiumPath returns the Chromium binary to run: $CHROMIUM_PATH, else `chromium` or
// `chromium-browser` on PATH, else /usr/bin/chromium.
func ChromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CHROMIUM_PATH=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	return "", errors.New("no chromium on PATH and no /usr/bin/chromium (apt-get install chromium, or set CHROMIUM_PATH)")
}

// Flags are the Chromium command-line switches that New adds to chromedp's defaults.
var Flags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// New starts a fresh headless Chromium with a new profile in t.TempDir() and returns a chromedp
// context for its first tab. The browser stops when the test ends. It fails the test when Chromium
// is missing or does not start.
func New(t testing.TB) context.Context {
	t.Helper()
	needs.External(t, "Chromium")
	path, err := ChromiumPath()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	for _, f := range Flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	lg := &logger{t: t}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(lg.logf), chromedp.WithLogf(lg.logf))
	stop := func() {
		lg.close()
		cancel()
		cancelAlloc()
	}
	if err := chromedp.Do(ctx); err != nil {
		stop()
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	t.Cleanup(stop)
	return ctx
}

// NewTab opens a new tab in the browser of ctx (a context from New) and closes it when the test ends.
func NewTab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	if err := chromedp.Do(tab); err != nil {
		cancel()
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	t.Cleanup(cancel)
	return tab
}

// logger forwards chromedp's messages to the test log until the test ends.
type logger struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (l *logger) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Logf("chromedp: "+format, args...)
	}
}

func (l *logger) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// Navigate loads url in the tab and waits for the load event.
func Navigate(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Navigate(url)); err != nil {
		t.Fatalf("browsertest: navigate %s: %v", url, err)
	}
}

// Do runs chromedp actions with a timeout, failing the test on error.
func Do(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// Eval evaluates a JavaScript expression in the top frame, awaits it when it is a promise, and
// decodes its JSON value into T. Use chromedp.Void to ignore the value.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := EvalErr[T](ctx, expr)
	if err != nil {
		t.Fatalf("browsertest: eval %s: %v", short(expr), err)
	}
	return v
}

// EvalErr is Eval that returns the error instead of failing the test.
func EvalErr[T any](ctx context.Context, expr string) (T, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// Wait polls a JavaScript condition in the top frame until it is truthy or the timeout passes.
// Evaluation errors (e.g. while the page navigates) count as "not yet".
func Wait(ctx context.Context, expr string, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() (bool, error) { return EvalErr[bool](ctx, "!!("+expr+")") })
}

// WaitJS is Wait that fails the test on timeout.
func WaitJS(t testing.TB, ctx context.Context, expr string, timeout time.Duration) {
	t.Helper()
	if err := Wait(ctx, expr, timeout); err != nil {
		t.Fatalf("browsertest: waiting for %s: %v", short(expr), err)
	}
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("timed out after %v (last error: %v)", timeout, last)
			}
			return fmt.Errorf("timed out after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FrameEval evaluates a JavaScript expression in the first child frame whose URL contains urlPart,
// and decodes its JSON value into T. It runs in an isolated world of that frame: the DOM is shared
// with the page (so it can read, fill and click elements, and the page's listeners fire), its
// JavaScript globals are not. Frames of other origins work when they are same-site (e.g. two
// 127.0.0.1 ports), because they then share the tab's renderer.
func FrameEval[T any](t testing.TB, ctx context.Context, urlPart, expr string) T {
	t.Helper()
	v, err := FrameEvalErr[T](ctx, urlPart, expr)
	if err != nil {
		t.Fatalf("browsertest: eval in frame %q: %s: %v", urlPart, short(expr), err)
	}
	return v
}

// FrameEvalErr is FrameEval that returns the error instead of failing the test.
func FrameEvalErr[T any](ctx context.Context, urlPart, expr string) (T, error) {
	var zero T
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tree, err := chromedp.Call(c, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return zero, err
	}
	f := findFrame(tree.FrameTree, urlPart, true)
	if f == nil {
		return zero, fmt.Errorf("no child frame with a URL containing %q", urlPart)
	}
	w, err := chromedp.Call(c, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: f.ID, WorldName: "browsertest"})
	if err != nil {
		return zero, err
	}
	yes := true
	r, err := chromedp.Call(c, runtime.Evaluate, runtime.EvaluateParams{
		Expression: expr, ContextID: w.ExecutionContextID, ReturnByValue: &yes, AwaitPromise: &yes,
	})
	if err != nil {
		return zero, err
	}
	if r.ExceptionDetails != nil {
		return zero, &chromedp.ExceptionError{ExceptionDetails: r.ExceptionDetails}
	}
	if _, ok := any(zero).(chromedp.Void); ok || r.Result == nil {
		return zero, nil
	}
	v := []byte(r.Result.Value)
	if len(v) == 0 {
		v = []byte("null")
	}
	err = json.Unmarshal(v, &zero)
	return zero, err
}

// FrameURLs lists the URLs of the child frames of the tab.
func FrameURLs(t testing.TB, ctx context.Context) []string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tree, err := chromedp.Call(c, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		t.Fatalf("browsertest: frame tree: %v", err)
	}
	var urls []string
	var walk func(ft *page.FrameTree)
	walk = func(ft *page.FrameTree) {
		for _, ch := range ft.ChildFrames {
			urls = append(urls, ch.Frame.URL)
			walk(ch)
		}
	}
	walk(tree.FrameTree)
	return urls
}

func findFrame(ft *page.FrameTree, urlPart string, skipSelf bool) *cdp.Frame {
	if ft == nil {
		return nil
	}
	if !skipSelf && ft.Frame != nil && strings.Contains(ft.Frame.URL, urlPart) {
		return ft.Frame
	}
	for _, ch := range ft.ChildFrames {
		if f := findFrame(ch, urlPart, false); f != nil {
			return f
		}
	}
	return nil
}

// WaitFrameJS polls a JavaScript condition in the first child frame whose URL contains urlPart
// (see FrameEval) until it is truthy, failing the test on timeout.
func WaitFrameJS(t testing.TB, ctx context.Context, urlPart, expr string, timeout time.Duration) {
	t.Helper()
	err := waitFor(ctx, timeout, func() (bool, error) { return FrameEvalErr[bool](ctx, urlPart, "!!("+expr+")") })
	if err != nil {
		t.Fatalf("browsertest: waiting in frame %q for %s: %v", urlPart, short(expr), err)
	}
}

// Screenshot saves a PNG of the whole page to path (directories are created).
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// ScreenshotDir is where tests save screenshots: $BROWSERTEST_SCREENSHOTS when set (kept after
// the run), else a temporary directory of the test.
func ScreenshotDir(t testing.TB) string {
	if d := os.Getenv("BROWSERTEST_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// JS quotes a Go value as a JavaScript literal (JSON), for building expressions.
func JS(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

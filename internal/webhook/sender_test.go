package webhook

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/safehttp"
)

// buildFor builds the approved notification addressed to url.
func buildFor(t *testing.T, url string) Request {
	t.Helper()
	opts := testOptions(time.Now())
	opts.URL = url
	r, err := Build(approved(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func localSender(timeout time.Duration) Sender {
	return Sender{Client: safehttp.NewClient(safehttp.Options{AllowPrivate: true, Timeout: timeout})}
}

func TestSendClassifiesStatus(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		delivered  bool
		wantAfter  time.Duration
	}{
		{200, "", true, 0},
		{202, "", true, 0},
		{204, "", true, 0},
		{400, "", false, 0},
		{401, "", false, 0},
		{404, "", false, 0},
		{429, "120", false, 2 * time.Minute},
		{500, "", false, 0},
		{503, "Wed, 21 Oct 2099 07:28:00 GMT", false, MaxRetryAfter},
	}
	for _, c := range cases {
		var gotBody atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			gotBody.Store(string(b))
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.status)
		}))
		req := buildFor(t, srv.URL+"/notify")
		a := localSender(5*time.Second).Send(context.Background(), req)
		srv.Close()
		if a.Delivered() != c.delivered || a.StatusCode != c.status {
			t.Errorf("%d: delivered=%v status=%d err=%q", c.status, a.Delivered(), a.StatusCode, a.Err)
		}
		if c.delivered != (a.Err == "") {
			t.Errorf("%d: Err = %q", c.status, a.Err)
		}
		if a.RetryAfter != c.wantAfter {
			t.Errorf("%d: RetryAfter = %v, want %v", c.status, a.RetryAfter, c.wantAfter)
		}
		if a.At.IsZero() || a.Latency <= 0 {
			t.Errorf("%d: At=%v Latency=%v", c.status, a.At, a.Latency)
		}
		if gotBody.Load() != string(req.Body) {
			t.Errorf("%d: server got %v", c.status, gotBody.Load())
		}
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { targetHits.Add(1) }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	// A plain http.Client follows redirects; the Sender must not, whatever client it gets.
	for name, s := range map[string]Sender{"plain client": {Client: &http.Client{}}, "safehttp": localSender(5 * time.Second)} {
		a := s.Send(context.Background(), buildFor(t, srv.URL))
		if a.Delivered() || a.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(a.Err, "redirect") {
			t.Errorf("%s: %+v", name, a)
		}
	}
	if targetHits.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	a := localSender(150*time.Millisecond).Send(context.Background(), buildFor(t, srv.URL))
	if a.Delivered() || a.StatusCode != 0 || !strings.HasPrefix(a.Err, "timeout") {
		t.Fatalf("%+v", a)
	}
	if a.Latency < 150*time.Millisecond || a.Latency > 3*time.Second {
		t.Fatalf("latency %v", a.Latency)
	}
}

func TestSendConnectionErrorHidesURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	a := localSender(5*time.Second).Send(context.Background(), buildFor(t, "http://user:hunter2@"+addr+"/n?token=s3cr3t"))
	if a.Delivered() || a.StatusCode != 0 || a.Err == "" {
		t.Fatalf("%+v", a)
	}
	for _, secret := range []string{"s3cr3t", "hunter2", "token="} {
		if strings.Contains(a.Err, secret) {
			t.Fatalf("Err leaks %q: %s", secret, a.Err)
		}
	}
}

func TestSendRefusedByGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the guarded client reached a loopback receiver")
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(srv.Config.Handler)
	defer tlsSrv.Close()
	for name, c := range map[string]struct {
		s   Sender
		url string
	}{
		"guarded client":    {Sender{Client: safehttp.NewClient(safehttp.Options{})}, srv.URL},
		"nil client, http":  {Sender{}, srv.URL},
		"nil client, https": {Sender{}, tlsSrv.URL},
	} {
		a := c.s.Send(context.Background(), buildFor(t, c.url))
		if a.Delivered() || !strings.Contains(a.Err, "not allowed") {
			t.Errorf("%s: %+v", name, a)
		}
	}
}

// A receiver that streams an endless body must not hold the attempt until the
// timeout: the Sender stops reading after MaxResponseRead.
func TestSendReadsAtMost64KiB(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 4096)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	a := localSender(10*time.Second).Send(context.Background(), buildFor(t, srv.URL))
	if !a.Delivered() {
		t.Fatalf("%+v", a)
	}
	if a.Latency > 5*time.Second {
		t.Fatalf("Send waited %v for an endless body", a.Latency)
	}
}

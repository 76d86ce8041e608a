package stripemock

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Lazy serves on a free loopback port and starts stripe-mock (Run, bundled
// fixtures) at the first request it receives, then forwards every request
// to it: a local stack can point a client at stripe-mock without paying its
// start-up when nothing calls it (the dashboard's account checks in a
// sandbox stack). A start that failed answers 502 and is tried again at
// the next request. stop ends the server and stripe-mock.
func Lazy(dir string) (baseURL string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var (
		mu     sync.Mutex
		target *url.URL
		kill   func()
	)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		mu.Lock()
		r.SetURL(target)
		mu.Unlock()
	}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if target == nil {
			base, k, err := Run(context.Background(), dir, "")
			if err != nil {
				mu.Unlock()
				http.Error(w, "stripe-mock did not start: "+err.Error(), http.StatusBadGateway)
				return
			}
			target, _ = url.Parse(base)
			kill = k
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() {
		_ = srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if kill != nil {
			kill()
		}
	}, nil
}

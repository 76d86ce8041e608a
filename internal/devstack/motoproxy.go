package devstack

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// serializeDynamoDB fronts moto_server's DynamoDB API with a loopback proxy
// that forwards one request at a time, and returns the proxy's URL.
//
// moto (5.2.1) evaluates a ConditionExpression and then writes, with no lock
// between the two, on a threaded server: two concurrent conditional writes to
// one item can both pass (a cancel and an approval of one payment request
// both "win"; 5 increments guarded by a limit of 4 all succeed).
// DynamoDB documents conditional writes and transactions as atomic, and the
// service relies on exactly that. Serialising DynamoDB calls restores it;
// SQS and S3 still go to moto_server directly (long polls must not queue).
//
// A request is forwarded to its end even when its client gives up (the
// SDK's per-call timeout, frequent on a loaded machine): moto goes on
// serving it anyway, and releasing the turn at the client's timeout let the
// next call run beside it in moto. Two transactions side by side there
// interleave the wrapper's rollbacks (infra/local/moto-server.py) and can
// put back an increment a refused call undid: a loaded run counted a
// payment twice on the dashboard's overview.
func serializeDynamoDB(target string) (string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = &http.Transport{ResponseHeaderTimeout: motoAnswerTimeout, MaxIdleConnsPerHost: 16}
	one := make(chan struct{}, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case one <- struct{}{}:
		case <-r.Context().Done():
			return // the SDK gave up (its own timeout) while waiting
		}
		defer func() { <-one }()
		// Not cancelled with the client; bounded like the proxy's wait for
		// moto's answer.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), motoAnswerTimeout)
		defer cancel()
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// motoAnswerTimeout bounds one forwarded call: moto answers within it, or
// the turn passes on.
const motoAnswerTimeout = 30 * time.Second

package devstack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/cfn"
)

// The local gateway behaves like API Gateway + Lambda: route matching from the
// template, path parameters, raw header values, binary-safe bodies, and API
// Gateway's own 404 for undeclared routes.
func TestGatewayInvokesThroughTheLambdaAdapter(t *testing.T) {
	// Like every function, the handler routes itself (its own ServeMux).
	echo := http.NewServeMux()
	echo.HandleFunc("POST /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Key", r.Header.Get("Idempotency-Key"))
		w.Header().Add("Set-Cookie", "a=1")
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" id="+r.PathValue("id")+" q="+r.URL.Query().Get("q")+" body="+string(body))
	})
	fns := []cfn.FunctionSpec{{LogicalID: "Fn", Routes: []cfn.Route{{Method: "POST", Path: "/things/{id}"}}}}
	srv := httptest.NewServer(NewGateway(fns, map[string]http.Handler{"Fn": echo}))
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/things/7?q=x%20y", strings.NewReader("\x00\xffbinary"))
	req.Header.Set("Idempotency-Key", "k1, k2,k3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(b); got != "POST /things/7 id=7 q=x y body=\x00\xffbinary" {
		t.Fatalf("body %q", got)
	}
	if resp.Header.Get("X-Got-Key") != "k1, k2,k3" || resp.Header.Get("Set-Cookie") != "a=1" {
		t.Fatalf("headers %v", resp.Header)
	}
	for _, u := range []string{"/things", "/other"} {
		r, _ := http.Get(srv.URL + u)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 404 || string(b) != `{"message":"Not Found"}` {
			t.Fatalf("%s: %d %s", u, r.StatusCode, b)
		}
	}
	if r, _ := http.Get(srv.URL + "/things/7"); r.StatusCode != 405 && r.StatusCode != 404 {
		t.Fatalf("wrong method: %d", r.StatusCode)
	}
}

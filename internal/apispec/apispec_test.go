package apispec

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSpecLoadsAndRejectsDrift(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://127.0.0.1:9/payment-requests/status/5", nil)
	h := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"r1"}}
	good := `{"type":"https://x/y","title":"Not Found","status":404,"code":"043"}`
	if err := s.Check(req, 404, h, []byte(good)); err != nil {
		t.Fatalf("valid problem rejected: %v", err)
	}
	if err := s.Check(req, 404, h, []byte(`{"title":"no type"}`)); err == nil {
		t.Fatal("problem without type accepted")
	}
	if err := s.Check(req, 418, h, []byte(good)); err == nil {
		t.Fatal("undocumented status accepted")
	}
	undocumented := httptest.NewRequest("GET", "http://127.0.0.1:9/nowhere", nil)
	if err := s.Check(undocumented, 200, h, nil); err == nil || !strings.Contains(err.Error(), "not in openapi.yaml") {
		t.Fatalf("undocumented path: %v", err)
	}
	// A tracked header the description does not declare on that response is drift.
	echo := httptest.NewRequest("GET", "http://127.0.0.1:9/callbacks/test/text", nil)
	text := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Request-Id": {"r1"}}
	if err := s.Check(echo, 200, text, []byte("received GET /callbacks/test/text\n")); err != nil {
		t.Fatalf("valid echo rejected: %v", err)
	}
	text.Set("RateLimit", `"default";r=1;t=2`)
	if err := s.Check(echo, 200, text, []byte("received GET /callbacks/test/text\n")); err == nil || !strings.Contains(err.Error(), "does not declare") {
		t.Fatalf("undeclared RateLimit accepted: %v", err)
	}
	if err := s.Check(req, 404, http.Header{"Content-Type": {"application/problem+json"}}, []byte(good)); err == nil {
		t.Fatal("response without X-Request-Id accepted")
	}
	ok := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	if err := s.Check(req, 200, ok, []byte(`{"id":1}`)); err == nil {
		t.Fatal("incomplete payment request accepted")
	}
}

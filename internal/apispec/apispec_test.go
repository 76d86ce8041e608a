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
	h := http.Header{"Content-Type": {"application/problem+json"}}
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
	ok := http.Header{"Content-Type": {"application/json"}}
	if err := s.Check(req, 200, ok, []byte(`{"id":1}`)); err == nil {
		t.Fatal("incomplete payment request accepted")
	}
}

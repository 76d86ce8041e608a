package adyen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/adyen"
)

// TestRequestsMatchAdyensDescription holds every request the connector can
// send to Adyen's own description (the copy Prism serves), with
// kin-openapi, in the fast suite: no node needed. The Prism tests prove the
// same end to end; this one fails first when a field drifts. The answers
// here are canned (the test is about requests); the validator is shown to
// bite on a request that lacks a required field.
func TestRequestsMatchAdyensDescription(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(adyenmock.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("Adyen's description: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	validate := func(method, path string, header http.Header, body []byte) error {
		req, _ := http.NewRequest(method, "https://checkout-test.adyen.com/v71"+path, bytes.NewReader(body))
		req.Header = header.Clone()
		route, params, err := router.FindRoute(req)
		if err != nil {
			return err
		}
		return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if in.SecuritySchemeName == "ApiKeyAuth" && req.Header.Get("X-API-Key") != "" {
					return nil
				}
				return errors.New("no API key")
			}},
		})
	}

	type sent struct {
		method, path string
		header       http.Header
		body         []byte
	}
	var mu sync.Mutex
	var got []sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, sent{r.Method, r.URL.Path, r.Header, b})
		mu.Unlock()
		var in struct {
			Reference        string `json:"reference"`
			PaymentReference string `json:"paymentReference"`
		}
		_ = json.Unmarshal(b, &in)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/cancels":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"merchantAccount":"m","paymentReference":"`+in.PaymentReference+`","pspReference":"P3","status":"received"}`)
		case strings.HasSuffix(r.URL.Path, "/refunds"), strings.HasSuffix(r.URL.Path, "/cancels"), strings.HasSuffix(r.URL.Path, "/reversals"):
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"merchantAccount":"m","paymentPspReference":"P1","pspReference":"P2","status":"received"}`)
		default:
			_, _ = io.WriteString(w, `{"resultCode":"Authorised","pspReference":"P1","merchantReference":"`+in.Reference+`"}`)
		}
	}))
	defer srv.Close()
	p, err := adyen.New(adyen.Options{APIKey: "k", MerchantAccount: "PayreqECOM", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	present := chargeReq("4111111111111111", "10.00", "EUR")
	present.Email, present.HolderName = "jane@example.com", "Jane Doe"
	moto := chargeReq("4111111111111111", "1000", "CLP")
	moto.CardholderPresent = false
	calls := []func() error{
		func() error { _, err := p.Charge(ctx, present); return err },
		func() error { _, err := p.Charge(ctx, moto); return err },
		func() error {
			_, err := p.SubmitDetails(ctx, present.Reference, map[string]string{"redirectResult": "abc"})
			return err
		},
		func() error { _, err := p.Lookup(ctx, present.Reference); return err },
		func() error {
			_, err := p.Refund(ctx, provider.RefundRequest{RefundID: "rf_1", ProviderRef: "P1", Amount: decimal.RequireFromString("2.50"), Unit: "EUR"})
			return err
		},
		func() error {
			_, err := p.Refund(ctx, provider.RefundRequest{RefundID: "void_1", Void: true, ProviderRef: "P1", Amount: decimal.RequireFromString("10"), Unit: "EUR"})
			return err
		},
		func() error { _, err := p.Cancel(ctx, present.Reference, "P1"); return err },
		func() error { return p.CancelReference(ctx, present.Reference) },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if len(got) != len(calls) {
		t.Fatalf("%d requests sent, want %d", len(got), len(calls))
	}
	if got[4].path != "/payments/P1/refunds" || got[5].path != "/payments/P1/reversals" {
		t.Fatalf("refund sent to %s, void to %s; want /refunds and /reversals", got[4].path, got[5].path)
	}
	for _, s := range got {
		if s.header.Get("Idempotency-Key") == "" {
			t.Errorf("%s %s without an Idempotency-Key", s.method, s.path)
		}
		if err := validate(s.method, s.path, s.header, s.body); err != nil {
			t.Errorf("%s %s breaks Adyen's description: %v\n%s", s.method, s.path, err, s.body)
		}
	}
	// The validator bites: the first charge without its returnUrl.
	var m map[string]any
	_ = json.Unmarshal(got[0].body, &m)
	delete(m, "returnUrl")
	broken, _ := json.Marshal(m)
	if err := validate(got[0].method, got[0].path, got[0].header, broken); err == nil {
		t.Fatal("a /payments request without returnUrl passed the description")
	}
}

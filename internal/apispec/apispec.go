// Package apispec checks HTTP exchanges against docs/openapi.yaml, so the API
// description cannot drift from the code: integration tests validate every
// response they receive.
package apispec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/payreq/payreq/docs"
)

// Spec is a loaded, validated OpenAPI document.
type Spec struct {
	Doc    *openapi3.T
	router routers.Router
	host   string
}

// The hosted page's HTML, scripts and style sheets are text: validate them
// as strings, like text/plain.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		if openapi3filter.RegisteredBodyDecoder(ct) == nil {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
	}
}

// Load parses and validates docs/openapi.yaml.
func Load() (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is invalid: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi router: %w", err)
	}
	u, err := url.Parse(doc.Servers[0].URL)
	if err != nil {
		return nil, err
	}
	return &Spec{Doc: doc, router: router, host: u.Host}, nil
}

// Tracked are the response headers the description must declare on every
// response that carries them: a client reads them, so one the service sends
// on a response whose description does not mention it is drift.
var Tracked = []string{"X-Request-Id", "RateLimit", "RateLimit-Policy", "Idempotent-Replayed"}

// Check validates one exchange: the operation must be documented, the
// response status, headers and body must match its description, and every
// Tracked header the response carries must be declared on it.
func (s *Spec) Check(req *http.Request, status int, header http.Header, body []byte) error {
	// Match on the path only: the test server's address is not a documented server.
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "http", s.host, s.host
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		return fmt.Errorf("%s %s is not in openapi.yaml: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s → %d does not match openapi.yaml: %w\nbody: %s", req.Method, req.URL.Path, status, err, body)
	}
	resp := route.Operation.Responses.Status(status)
	if resp == nil {
		resp = route.Operation.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return nil // ValidateResponse has already refused an undocumented status
	}
	for _, name := range Tracked {
		if header.Get(name) == "" {
			continue
		}
		declared := false
		for k := range resp.Value.Headers {
			declared = declared || strings.EqualFold(k, name)
		}
		if !declared {
			return fmt.Errorf("%s %s → %d carries %s, which openapi.yaml does not declare on that response", req.Method, req.URL.Path, status, name)
		}
	}
	return nil
}

// Declared returns the names of the response headers the description
// declares for req answered with status (nil when it describes no such
// response).
func (s *Spec) Declared(req *http.Request, status int) ([]string, error) {
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "http", s.host, s.host
	route, _, err := s.router.FindRoute(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s is not in openapi.yaml: %w", req.Method, req.URL.Path, err)
	}
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil, nil
	}
	var names []string
	for k := range resp.Value.Headers {
		names = append(names, k)
	}
	return names, nil
}

package devstack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/problem"
)

const (
	// MaxRequestBody is API Gateway's request payload limit (HTTP APIs).
	MaxRequestBody = 10 << 20
	// MaxInvokePayload is Lambda's limit for a synchronous invocation's
	// event (6 MB); API Gateway can forward nothing larger.
	MaxInvokePayload = 6 << 20
)

// HTTPTarget is a function behind the gateway: its Lambda handler (invoked
// with JSON event bytes) and its template Timeout, the invocation deadline.
type HTTPTarget struct {
	Handler lambda.Handler
	Timeout time.Duration
}

// Gateway is a local stand-in for the HTTP API: it matches the template's
// routes, builds the payload format 2.0 event API Gateway would build and
// invokes the function's Lambda handler with it as JSON, so local behaviour
// is Lambda's behaviour.
type Gateway struct {
	mux *http.ServeMux
}

// NewGateway mounts targets[functionLogicalID] on that function's routes.
func NewGateway(functions []cfn.FunctionSpec, targets map[string]HTTPTarget) *Gateway {
	g := &Gateway{mux: http.NewServeMux()}
	for _, f := range functions {
		t, ok := targets[f.LogicalID]
		if !ok {
			continue
		}
		for _, rt := range f.Routes {
			g.mux.Handle(rt.Pattern(), route{target: t, functionID: f.LogicalID, routeKey: rt.Method + " " + rt.Path, params: pathParams(rt.Path)})
		}
	}
	return g
}

// Handle mounts a plain handler (local-only pages such as /demo).
func (g *Gateway) Handle(pattern string, h http.Handler) { g.mux.Handle(pattern, h) }

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := g.mux.Handler(r); pattern == "" {
		if allow := g.allowed(r); len(allow) > 0 {
			// A known path with another method: 405 with Allow (RFC 9110),
			// as a problem object like every other answer.
			problem.Write(w, r, problem.MethodNotAllowed(
				r.Method+" is not allowed on "+r.URL.Path+"; use "+strings.Join(allow, " or ")+".", allow))
			return
		}
		problem.Write(w, r, problem.From(errkind.NotFoundErr("No route matches "+r.Method+" "+r.URL.Path+".")))
		return
	}
	g.mux.ServeHTTP(w, r)
}

// routeMethods are the methods the template's routes use.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods some route serves on r's path.
func (g *Gateway) allowed(r *http.Request) []string {
	var out []string
	for _, m := range routeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := g.mux.Handler(probe); pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

var pathParamRE = regexp.MustCompile(`\{([^}+]+)\+?\}`)

// pathParams lists the parameter names of a template route path.
func pathParams(path string) []string {
	var names []string
	for _, m := range pathParamRE.FindAllStringSubmatch(path, -1) {
		names = append(names, m[1])
	}
	return names
}

type route struct {
	target     HTTPTarget
	functionID string
	routeKey   string
	params     []string
}

func (rt route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBody+1))
	if err != nil || len(body) > MaxRequestBody {
		problem.Write(w, r, problem.From(httpapi.TooLarge(MaxRequestBody)))
		return
	}
	ev := ToEvent(r, rt.routeKey, rt.params, body)
	payload, err := json.Marshal(ev)
	if err != nil {
		problem.Write(w, r, problem.From(err))
		return
	}
	if len(payload) > MaxInvokePayload {
		// Lambda refuses the invocation (RequestTooLargeException); the
		// client gets a 413 without the function running.
		problem.Write(w, r, problem.From(httpapi.TooLarge(MaxInvokePayload)))
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := InvokeBytes(r.Context(), rt.target.Handler, rt.functionID, rt.target.Timeout, payload, &resp); err != nil {
		// API Gateway's own answer to a failed or timed-out invocation.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
		return
	}
	writeResponse(w, resp)
}

// ToEvent builds the payload format 2.0 event of a request as API Gateway
// does: lower-case header names, repeated headers and query parameters
// joined with commas, cookies in their own list, path parameters by route,
// text bodies as is and binary bodies base64-encoded.
func ToEvent(r *http.Request, routeKey string, params []string, body []byte) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	ip, port, _ := net.SplitHostPort(r.RemoteAddr)
	headers["host"] = r.Host
	headers["x-forwarded-for"] = ip
	headers["x-forwarded-proto"] = "http"
	headers["x-forwarded-port"] = port
	if len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}
	var query map[string]string
	if vals := r.URL.Query(); len(vals) > 0 {
		query = map[string]string{}
		for k, vs := range vals {
			query[k] = strings.Join(vs, ",")
		}
	}
	var pathParameters map[string]string
	for _, p := range params {
		if pathParameters == nil {
			pathParameters = map[string]string{}
		}
		pathParameters[p] = r.PathValue(p)
	}
	now := time.Now()
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        pathParameters,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    Account,
			Stage:        "$default",
			RequestID:    newRequestID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) && utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

// isText reports whether API Gateway passes a body of this type as text:
// text/*, JSON, XML and JavaScript; anything else (forms, octet streams, no
// type at all) arrives base64-encoded.
func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript":
		return true
	}
	return false
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}

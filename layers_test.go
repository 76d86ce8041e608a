package payreq_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The layers, lowest first. A package may import packages of its own layer
// or of a lower one, never of a higher one (docs/architecture.md).
const (
	layerDomain  = iota // types and rules of the business: no I/O
	layerCore           // what the service does with them (the state machines), and what they do it with that is no AWS service and no Stripe: no AWS, no inbound HTTP
	layerAdapter        // packages that import an AWS service client or stripe-go (adapterImports), and the acquirer connectors (acquirerConnectors): storage, queues, Stripe, Adyen
	layerHandler        // the HTTP edge: handlers, their middleware, the problem table
	layerWiring         // builds each function from its parts
	layerEntry          // functions/ and cmd/, the local stack
	layerTest           // test-only packages: nothing but tests imports them
)

var layerNames = []string{"domain", "core", "adapter", "handler", "wiring", "entry", "test"}

// layerOf assigns every package of the module (path relative to the module)
// to its layer. A package missing here fails TestImportLayers: a new package
// is placed on purpose.
var layerOf = map[string]int{
	// domain
	"internal/batch":                     layerDomain, // the batch file format, the result file, a job's records
	"internal/card":                      layerDomain,
	"internal/checkouttoken":             layerDomain,
	"internal/codes":                     layerDomain,
	"internal/config":                    layerDomain, // a leaf on purpose: configuration imports no adapter
	"internal/connector":                 layerDomain, // named connectors over the provider seam
	"internal/crashpoint":                layerDomain,
	"internal/currency":                  layerDomain,
	"internal/dashuser":                  layerDomain,
	"internal/errkind":                   layerDomain,
	"internal/emf":                       layerDomain, // metrics are log lines: no I/O beyond the logger
	"internal/ids":                       layerDomain,
	"internal/merchant":                  layerDomain,
	"internal/payer":                     layerDomain,
	"internal/payment":                   layerDomain,
	"internal/paylink":                   layerDomain,
	"internal/routing":                   layerDomain, // a merchant's routing rules: pure data and matching
	"internal/provider":                  layerDomain, // the acquirer seam: types and the interface adapters implement
	"internal/provider/sandbox/asyncjob": layerDomain,
	"internal/provider/sandbox/ledger":   layerDomain,
	"internal/seal":                      layerDomain,
	"internal/sftpuser":                  layerDomain,
	"internal/sig":                       layerDomain,
	"web":                                layerDomain, // embedded assets: leaves
	"web/dashboard":                      layerDomain,

	// core: the state machines, with the store interfaces they need
	"internal/audit":                   layerCore,
	"internal/acquireraccount":         layerCore, // a merchant's own acquirer accounts, over store, sealer and checker interfaces
	"internal/batchproc":               layerCore, // the batch file's state machine (S3 and SQS events)
	"internal/lockout":                 layerCore, // attempt counting and lockout of dashboard and SFTP logins
	"internal/mail":                    layerCore, // an e-mail message and the local mailbox (files); SES is dashboardwire's
	"internal/notifier":                layerCore, // the notification state machine (SQS events) and the reconciler
	"internal/webhook":                 layerCore, // builds, signs and POSTs notifications (outbound HTTP through safehttp)
	"internal/paycore":                 layerCore, // payment, refund and 3-D Secure state machines
	"internal/provider/sandbox":        layerCore, // the simulated acquirer over its ledger interface
	"internal/safehttp":                layerCore, // the SSRF-safe client of merchants' endpoints
	"internal/provider/sandbox/worker": layerCore, // the sandbox acquirer's asynchronous side (SQS events)
	"internal/sftpauth":                layerCore, // login decisions; the Lambda is sftpauthwire's

	// adapters: exactly the packages that import an AWS service client or
	// stripe-go, and the acquirer connectors (TestAdaptersOnlyInWiring
	// checks the list both ways)
	"internal/awsconfig":       layerAdapter,
	"internal/dynamo":          layerAdapter,
	"internal/provider/adyen":  layerAdapter, // its own small HTTP client: an adapter because it is a connector
	"internal/provider/stripe": layerAdapter,
	"internal/queue":           layerAdapter,
	"internal/s3store":         layerAdapter,
	"internal/secrets":         layerAdapter,

	// handlers: the HTTP edge
	"internal/apikey":      layerHandler,
	"internal/callbacks":   layerHandler,
	"internal/checkout":    layerHandler,
	"internal/dashboard":   layerHandler,
	"internal/httpapi":     layerHandler,
	"internal/idempotency": layerHandler,
	"internal/lambdahttp":  layerHandler,
	"internal/merchantapi": layerHandler,
	"internal/paymentsapi": layerHandler,
	"internal/problem":     layerHandler, // the one table from an error kind to a problem
	"internal/ratelimit":   layerHandler,

	// wiring
	// (one package per function, so each binary links only its own parts)
	"internal/wire":                 layerWiring, // shared: config, AWS, store, sealer, handler shapes
	"internal/wire/guardwire":       layerWiring,
	"internal/wire/paywire":         layerWiring,
	"internal/wire/auditwire":       layerWiring,
	"internal/wire/batchwire":       layerWiring,
	"internal/wire/callbackswire":   layerWiring,
	"internal/wire/checkoutwire":    layerWiring,
	"internal/wire/dashboardwire":   layerWiring,
	"internal/wire/merchantapiwire": layerWiring,
	"internal/wire/notifierwire":    layerWiring,
	"internal/wire/paymentswire":    layerWiring,
	"internal/wire/reconcilerwire":  layerWiring,
	"internal/wire/sandboxwire":     layerWiring,
	"internal/wire/sftpauthwire":    layerWiring,

	// entry points and the local stack
	".":                            layerEntry, // template.yaml and the Makefile, embedded
	"cmd/payctl":                   layerEntry,
	"cmd/paydev":                   layerEntry,
	"docs":                         layerEntry,
	"functions/audit":              layerEntry,
	"functions/batch":              layerEntry,
	"functions/callbacks":          layerEntry,
	"functions/checkout":           layerEntry,
	"functions/dashboard":          layerEntry,
	"functions/merchantapi":        layerEntry,
	"functions/notifier":           layerEntry,
	"functions/payments":           layerEntry,
	"functions/reconciler":         layerEntry,
	"functions/sandbox":            layerEntry,
	"functions/sftpauth":           layerEntry,
	"internal/cfn":                 layerEntry, // reads template.yaml for the local stack and tests
	"internal/devstack":            layerEntry,
	"internal/devstack/stripemock": layerEntry,
	"internal/devstack/adyenmock":  layerEntry, // Prism serving Adyen's description before a front that plays Adyen
	"internal/devstack/sftpd":      layerEntry, // the local Transfer Family stand-in
	"web/internal/genbrands":       layerEntry,
	"web/internal/gencompressed":   layerEntry,

	// test-only
	"internal/apispec":            layerTest,
	"internal/browsertest":        layerTest,
	"internal/testenv":            layerTest,
	"internal/testing/bench":      layerTest,
	"internal/testing/clientgen":  layerTest,
	"internal/testing/crashtest":  layerTest,
	"internal/testing/faults":     layerTest,
	"internal/testing/lostanswer": layerTest,
	"internal/testing/memobjects": layerTest,
	"internal/testing/memstore":   layerTest,
	"internal/testing/motoserver": layerTest,
	"internal/testing/needs":      layerTest,
	"internal/testing/stripetest": layerTest,
	"internal/testing/adyentest":  layerTest,
}

// adapterImports are the imports that make a package an adapter: an AWS
// service client (or the SDK's configuration and features) or stripe-go.
var adapterImports = []string{
	"github.com/aws/aws-sdk-go-v2/service/",
	"github.com/aws/aws-sdk-go-v2/config",
	"github.com/aws/aws-sdk-go-v2/feature/",
	"github.com/stripe/stripe-go/",
}

// acquirerConnectors are the packages that talk to an acquirer: adapters
// whatever their imports (a connector with a client of its own imports no
// SDK), so only wiring builds one and the core sees the provider seam.
var acquirerConnectors = map[string]bool{
	"internal/provider/stripe": true,
	"internal/provider/adyen":  true,
}

// isAdapter reports whether p is an acquirer connector or imports an AWS
// service client or stripe-go.
func isAdapter(p goPackage) bool {
	if acquirerConnectors[rel(p.ImportPath)] {
		return true
	}
	for _, imp := range p.Imports {
		for _, a := range adapterImports {
			if strings.HasPrefix(imp, a) {
				return true
			}
		}
	}
	return false
}

// httpEdge are the packages that may speak HTTP statuses: the handlers,
// and the packages whose other side is an HTTP server (they read its
// answers). Everything else reports an error kind (internal/errkind) and
// lets the edge choose the status.
var httpEdge = map[string]string{
	"internal/webhook":                 "reads the merchant's answer",
	"internal/safehttp":                "the client of merchants' endpoints",
	"internal/provider/stripe":         "reads Stripe's answers",
	"internal/provider/adyen":          "reads Adyen's answers",
	"internal/provider/sandbox/worker": "posts the sandbox acquirer's callbacks to the service",
}

// problemWriters are the packages that write problems (import
// internal/problem): the edge's one writer, and the local stack's gateway
// (API Gateway's stand-in answers unknown routes and methods itself).
var problemWriters = map[string]bool{
	"internal/httpapi":  true,
	"internal/devstack": true,
}

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Module     *struct{ Path string }
}

// listDeps is `go list -deps -json ./...`, run once for the tests that read it.
var listDeps = sync.OnceValues(func() ([]byte, error) {
	return exec.Command("go", "list", "-deps", "-json", "./...").Output()
})

func modulePackages(t *testing.T) map[string]goPackage {
	t.Helper()
	out, err := listDeps()
	if err != nil {
		t.Fatalf("go list -deps -json: %v", err)
	}
	const module = "github.com/payreq/payreq"
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		pkgs[rel(p.ImportPath)] = p
	}
	return pkgs
}

func rel(importPath string) string {
	const module = "github.com/payreq/payreq"
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// TestImportLayers: every package has a layer and imports only its own
// layer or lower ones (domain ← core ← adapters ← HTTP edge ← wiring ←
// functions and cmd ← test-only packages).
func TestImportLayers(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages of the module; expected the whole module", len(pkgs))
	}
	for _, n := range sortedNames(pkgs) {
		from, ok := layerOf[n]
		if !ok {
			t.Errorf("package %s has no layer: add it to layerOf in layers_test.go and docs/architecture.md", n)
			continue
		}
		for _, imp := range pkgs[n].Imports {
			if _, ours := pkgs[rel(imp)]; !ours {
				continue
			}
			if to, ok := layerOf[rel(imp)]; ok && to > from {
				t.Errorf("%s (%s) imports %s (%s): imports point down the layers only", n, layerNames[from], rel(imp), layerNames[to])
			}
		}
	}
	for n := range layerOf {
		if _, ok := pkgs[n]; !ok {
			t.Errorf("layerOf lists %s, which is not a package of the module", n)
		}
	}
}

// TestAdaptersOnlyInWiring: the adapter layer is exactly the packages that
// import an AWS service client or stripe-go, and outside wiring, the entry
// points, the local stack and test helpers no package imports one, nor does
// an adapter import another (storage stores domain types). The core and the
// HTTP edge see adapters only as the small interfaces they declare.
func TestAdaptersOnlyInWiring(t *testing.T) {
	pkgs := modulePackages(t)
	for _, n := range sortedNames(pkgs) {
		l, ok := layerOf[n]
		if !ok {
			continue // TestImportLayers reports it
		}
		if a := isAdapter(pkgs[n]); a && l < layerWiring && l != layerAdapter {
			t.Errorf("%s (%s) is an acquirer connector or imports an AWS service client or stripe-go: only adapters, wiring and entry points do", n, layerNames[l])
		} else if !a && l == layerAdapter {
			t.Errorf("%s is filed as an adapter but is no acquirer connector and imports no AWS service client nor stripe-go: file it by what it does", n)
		}
		if l >= layerWiring {
			continue
		}
		for _, imp := range pkgs[n].Imports {
			if layerOf[rel(imp)] == layerAdapter && rel(imp) != n {
				if _, ours := pkgs[rel(imp)]; ours && rel(imp) != "internal/awsconfig" {
					t.Errorf("%s (%s) imports the adapter %s: declare the interface it needs and let the wiring pass the adapter", n, layerNames[l], rel(imp))
				}
			}
		}
	}
}

// TestHTTPOnlyAtTheEdge: outside the HTTP edge (and the few packages whose
// other side is an HTTP server: httpEdge) no package names an HTTP status;
// they return error kinds, and the edge maps a kind to a status in the one
// table (internal/problem). Only problemWriters import that table. No
// package below the wiring writes a status as a number.
func TestHTTPOnlyAtTheEdge(t *testing.T) {
	pkgs := modulePackages(t)
	for _, n := range sortedNames(pkgs) {
		p := pkgs[n]
		l, ok := layerOf[n]
		if !ok {
			continue
		}
		if l < layerTest && !problemWriters[n] && slices.Contains(p.Imports, "github.com/payreq/payreq/internal/problem") {
			if why, ok := notYetProblem[n]; !ok {
				t.Errorf("%s imports internal/problem: return an errkind error and let the edge's one writer (httpapi.Error) choose the status", n)
			} else {
				t.Logf("%s imports internal/problem (not yet: %s)", n, why)
			}
		}
		if l >= layerWiring {
			continue
		}
		named, number := statusUse(t, p)
		if number != "" {
			t.Errorf("%s writes the status %s: name it (http.StatusXxx), at the edge only", n, number)
		}
		if _, edge := httpEdge[n]; named != "" && l != layerHandler && !edge {
			t.Errorf("%s names %s: outside the HTTP edge, return an errkind error and let the edge choose the status", n, named)
		}
	}
	for n := range notYetProblem {
		if slices.Contains(pkgs[n].Imports, "github.com/payreq/payreq/internal/problem") {
			continue
		}
		t.Errorf("notYetProblem lists %s, which no longer imports internal/problem: remove it from the list", n)
	}
	for n := range httpEdge {
		if layerOf[n] == layerHandler {
			t.Errorf("httpEdge lists %s, a handler: handlers are the edge already", n)
		}
	}
}

// notYetProblem are packages outside problemWriters that still import the
// problem table, each with why. The list only shrinks.
var notYetProblem = map[string]string{}

func sortedNames(pkgs map[string]goPackage) []string {
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// statusUse returns the first http.StatusXxx a package's non-test files
// name, and the first status they write as a number: an integer literal
// given to WriteHeader, http.Error, http.Redirect, or compared with,
// assigned to or keyed as a status (an identifier or field whose name ends
// in "status" or "StatusCode", any case).
func statusUse(t *testing.T, p goPackage) (named, number string) {
	fset := token.NewFileSet()
	for _, f := range p.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		alias := ""
		for _, is := range file.Imports {
			if path, _ := strconv.Unquote(is.Path.Value); path == "net/http" {
				alias = "http"
				if is.Name != nil {
					alias = is.Name.Name
				}
			}
		}
		at := func(n ast.Node) string { return " (" + fset.Position(n.Pos()).String() + ")" }
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && alias != "" && id.Name == alias && strings.HasPrefix(n.Sel.Name, "Status") && named == "" {
					named = alias + "." + n.Sel.Name + at(n)
				}
			case *ast.CallExpr:
				arg := -1
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					switch {
					case fn.Sel.Name == "WriteHeader":
						arg = 0
					case isPkg(fn.X, alias) && fn.Sel.Name == "Error":
						arg = 2
					case isPkg(fn.X, alias) && fn.Sel.Name == "Redirect":
						arg = 3
					}
				}
				if arg >= 0 && arg < len(n.Args) && number == "" {
					if lit := statusLiteral(n.Args[arg]); lit != "" {
						number = lit + at(n)
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && number == "" {
					if isStatusName(n.X) && statusLiteral(n.Y) != "" {
						number = statusLiteral(n.Y) + at(n)
					} else if isStatusName(n.Y) && statusLiteral(n.X) != "" {
						number = statusLiteral(n.X) + at(n)
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if i < len(n.Rhs) && isStatusName(lhs) && statusLiteral(n.Rhs[i]) != "" && number == "" {
						number = statusLiteral(n.Rhs[i]) + at(n)
					}
				}
			case *ast.KeyValueExpr:
				if isStatusName(n.Key) && statusLiteral(n.Value) != "" && number == "" {
					number = statusLiteral(n.Value) + at(n)
				}
			}
			return true
		})
		if named != "" && number != "" {
			return named, number
		}
	}
	return named, number
}

func isPkg(x ast.Expr, alias string) bool {
	id, ok := x.(*ast.Ident)
	return ok && alias != "" && id.Name == alias
}

// isStatusName reports whether e names a status: status, Status,
// resp.StatusCode, p.Status.
func isStatusName(e ast.Expr) bool {
	name := ""
	switch e := e.(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
	}
	l := strings.ToLower(name)
	return strings.HasSuffix(l, "status") || strings.HasSuffix(l, "statuscode")
}

// statusLiteral returns e if it is an integer literal in 100–599.
func statusLiteral(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return ""
	}
	if v, err := strconv.Atoi(lit.Value); err == nil && v >= 100 && v <= 599 {
		return lit.Value
	}
	return ""
}

// TestStatusUseFindsNamesAndNumbers: the status check sees a named status
// and each way a number is written as one.
func TestStatusUseFindsNamesAndNumbers(t *testing.T) {
	for src, want := range map[string][2]bool{
		`w.WriteHeader(http.StatusTeapot)`:            {true, false},
		`w.WriteHeader(418)`:                          {false, true},
		`http.Error(w, "x", 400)`:                     {false, true},
		`http.Redirect(w, r, "/", 302)`:               {false, true},
		`if resp.StatusCode == 410 { return }`:        {false, true},
		`status := 0; status = 503; _ = status`:       {false, true},
		`_ = struct{ Status int }{Status: 429}`:       {false, true},
		`n := 404; _ = n; _ = r.ContentLength == 200`: {false, false},
	} {
		dir := t.TempDir()
		file := "package x\n\nimport \"net/http\"\n\nvar resp *http.Response\n\nfunc f(w http.ResponseWriter, r *http.Request) {\n\t" + src + "\n}\n"
		if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		named, number := statusUse(t, goPackage{Dir: dir, GoFiles: []string{"x.go"}})
		if (named != "") != want[0] || (number != "") != want[1] {
			t.Errorf("%s: named %q, number %q; want named %v, number %v", src, named, number, want[0], want[1])
		}
	}
}

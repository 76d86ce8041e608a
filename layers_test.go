package payreq_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The layers, lowest first. A package may import packages of its own layer
// or of a lower one, never of a higher one (docs/architecture.md).
const (
	layerDomain  = iota // types and rules of the business: no I/O
	layerCore           // what the service does with them: no AWS, no HTTP
	layerAdapter        // DynamoDB, SQS, S3, Secrets Manager, Stripe, sandbox, outbound HTTP
	layerHandler        // HTTP handlers and event handlers (Lambda functions' logic)
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
	"internal/batch":         layerDomain, // the batch file format and the result file
	"internal/card":          layerDomain,
	"internal/checkouttoken": layerDomain,
	"internal/codes":         layerDomain,
	"internal/config":        layerDomain, // a leaf on purpose: configuration imports no adapter
	"internal/crashpoint":    layerDomain,
	"internal/currency":      layerDomain,
	"internal/dashuser":      layerDomain,
	"internal/errkind":       layerDomain,
	"internal/emf":           layerDomain, // metrics are log lines: no I/O beyond the logger
	"internal/ids":           layerDomain,
	"internal/merchant":      layerDomain,
	"internal/payer":         layerDomain,
	"internal/payment":       layerDomain,
	"internal/paylink":       layerDomain,
	"internal/provider":      layerDomain, // the acquirer seam: types and the interface adapters implement
	"internal/sandboxjob":    layerDomain,
	"internal/sandboxledger": layerDomain,
	"internal/seal":          layerDomain,
	"internal/sftpuser":      layerDomain,
	"internal/sig":           layerDomain,
	"web":                    layerDomain, // embedded assets: leaves
	"web/dashboard":          layerDomain,
	"internal/problem":       layerDomain, // RFC 9457 bodies; who may import it is the second rule

	// core
	"internal/audit":    layerCore,
	"internal/lockout":  layerCore, // attempt counting and lockout of dashboard and SFTP logins
	"internal/payments": layerCore,
	"internal/sftpauth": layerCore, // login decisions; the Lambda is sftpauthwire's

	// adapters
	"internal/awsconfig":        layerAdapter,
	"internal/dynamo":           layerAdapter,
	"internal/notify":           layerAdapter, // builds and POSTs notifications
	"internal/provider/sandbox": layerAdapter,
	"internal/provider/stripe":  layerAdapter,
	"internal/queue":            layerAdapter,
	"internal/s3store":          layerAdapter,
	"internal/safehttp":         layerAdapter,
	"internal/secrets":          layerAdapter,

	// handlers
	"internal/apikey":        layerHandler,
	"internal/batchproc":     layerHandler, // S3 and SQS events
	"internal/callbacks":     layerHandler,
	"internal/checkout":      layerHandler,
	"internal/dashboard":     layerHandler,
	"internal/httpapi":       layerHandler,
	"internal/idempotency":   layerHandler,
	"internal/lambdahttp":    layerHandler,
	"internal/merchantapi":   layerHandler,
	"internal/notifier":      layerHandler, // SQS events and the reconciler's schedule
	"internal/paymentsapi":   layerHandler,
	"internal/ratelimit":     layerHandler,
	"internal/sandboxworker": layerHandler, // SQS events

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
	".":                             layerEntry, // template.yaml and the Makefile, embedded
	"cmd/payctl":                    layerEntry,
	"cmd/paydev":                    layerEntry,
	"docs":                          layerEntry,
	"functions/audit":               layerEntry,
	"functions/batch":               layerEntry,
	"functions/callbacks":           layerEntry,
	"functions/checkout":            layerEntry,
	"functions/dashboard":           layerEntry,
	"functions/merchantapi":         layerEntry,
	"functions/notifier":            layerEntry,
	"functions/payments":            layerEntry,
	"functions/reconciler":          layerEntry,
	"functions/sandbox":             layerEntry,
	"functions/sftpauth":            layerEntry,
	"internal/cfn":                  layerEntry, // reads template.yaml for the local stack and tests
	"internal/devstack":             layerEntry,
	"internal/devstack/stripemockd": layerEntry,
	"internal/sftpd":                layerEntry, // the local Transfer Family stand-in
	"web/internal/genbrands":        layerEntry,
	"web/internal/gencompressed":    layerEntry,

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
	"internal/testing/stripemock": layerTest,
}

// notYetDown are imports against the layer order still to remove, each with
// why it is there. The list only shrinks.
var notYetDown = map[[2]string]string{}

// forbidden are imports the layer order allows but the design does not:
// the storage adapter knows no other adapter (it stores domain types).
var forbidden = map[string][]string{
	"internal/dynamo": {"internal/provider/sandbox", "internal/provider/stripe", "internal/notify", "internal/queue", "internal/s3store", "internal/safehttp"},
}

// httpEdge are the packages that may speak HTTP statuses: the handlers, and
// the adapters whose other side is an HTTP server (they read its statuses).
// Everything else reports an error kind (internal/errkind) and lets the
// edge choose the status.
var httpEdge = map[string]bool{
	"internal/notify":          true, // reads the merchant's answer
	"internal/notifier":        true, // 410 Gone from the merchant stops retries
	"internal/safehttp":        true,
	"internal/provider/stripe": true, // reads Stripe's answers
	"internal/sandboxworker":   true, // posts callbacks to the service
	"internal/apikey":          true,
	"internal/callbacks":       true,
	"internal/checkout":        true,
	"internal/dashboard":       true,
	"internal/httpapi":         true,
	"internal/idempotency":     true,
	"internal/lambdahttp":      true,
	"internal/merchantapi":     true,
	"internal/paymentsapi":     true,
	"internal/ratelimit":       true,
	"internal/problem":         true, // the bodies themselves
}

// notYetKinds are packages outside the HTTP edge that still build
// problems or name HTTP statuses, each with why. The list only shrinks.
var notYetKinds = map[string]string{}

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Module     *struct{ Path string }
}

func modulePackages(t *testing.T) map[string]goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json", "./...").Output()
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
// layer or lower ones (domain ← core ← adapters ← handlers ← wiring ←
// functions and cmd), tests import no test-only package into a binary, and
// the storage adapter imports no other adapter.
func TestImportLayers(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages of the module; expected the whole module", len(pkgs))
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		from, ok := layerOf[n]
		if !ok {
			t.Errorf("package %s has no layer: add it to layerOf in layers_test.go and docs/architecture.md", n)
			continue
		}
		for _, imp := range pkgs[n].Imports {
			if _, ours := pkgs[rel(imp)]; !ours {
				continue
			}
			to, ok := layerOf[rel(imp)]
			if !ok {
				continue // reported above
			}
			if to > from && notYetDown[[2]string{n, rel(imp)}] == "" {
				t.Errorf("%s (%s) imports %s (%s): imports point down the layers only", n, layerNames[from], rel(imp), layerNames[to])
			}
			for _, f := range forbidden[n] {
				if rel(imp) == f {
					t.Errorf("%s imports %s: the storage adapter stores domain types and knows no other adapter", n, f)
				}
			}
		}
	}
	for edge := range notYetDown {
		if !slices.Contains(pkgs[edge[0]].Imports, "github.com/payreq/payreq/"+edge[1]) {
			t.Errorf("notYetDown lists %s → %s, which is gone: remove it from the list", edge[0], edge[1])
		}
	}
	for n := range layerOf {
		if _, ok := pkgs[n]; !ok {
			t.Errorf("layerOf lists %s, which is not a package of the module", n)
		}
	}
}

// TestHTTPOnlyAtTheEdge: outside the HTTP edge no package imports the
// problem package or names a net/http status (http.StatusXxx): they return
// error kinds, and the edge maps a kind to a status in one table.
func TestHTTPOnlyAtTheEdge(t *testing.T) {
	pkgs := modulePackages(t)
	offending := map[string]string{}
	for n, p := range pkgs {
		l, ok := layerOf[n]
		if !ok || l >= layerWiring || httpEdge[n] {
			continue
		}
		for _, imp := range p.Imports {
			if rel(imp) == "internal/problem" {
				offending[n] = "imports internal/problem"
			}
		}
		if use := statusUse(t, p); use != "" && offending[n] == "" {
			offending[n] = "names " + use
		}
	}
	for n, why := range offending {
		if _, ok := notYetKinds[n]; !ok {
			t.Errorf("%s %s: outside the HTTP edge, return an errkind error and let the edge choose the status", n, why)
		}
	}
	for n := range notYetKinds {
		if _, ok := offending[n]; !ok {
			t.Errorf("notYetKinds lists %s, which no longer speaks HTTP: remove it from the list", n)
		}
	}
}

// statusUse returns the first http.StatusXxx a package's non-test files name.
func statusUse(t *testing.T, p goPackage) string {
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
		if alias == "" {
			continue
		}
		found := ""
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && found == "" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == alias && strings.HasPrefix(sel.Sel.Name, "Status") {
					found = alias + "." + sel.Sel.Name + " (" + fset.Position(sel.Pos()).String() + ")"
				}
			}
			return found == ""
		})
		if found != "" {
			return found
		}
	}
	return ""
}

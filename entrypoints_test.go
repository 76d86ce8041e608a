package payreq_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/devstack"
)

// functionDirs maps each template function to its functions/<dir>, from the
// Makefile's build-<LogicalId> targets (what sam build runs).
func functionDirs(t *testing.T) map[string]string {
	t.Helper()
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^build-(\w+):\n\t.*\./functions/(\w+)\s*$`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(mk), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// Every functions/<name>/main.go is exactly: build the handler with the
// entry point the local stack registers for that function, exit on error,
// lambda.Start(handler). No main.go builds an adapter or handler of its own,
// so what runs on Lambda is what the local stack and the tests invoke.
func TestMainOnlyStartsTheRegisteredEntryPoint(t *testing.T) {
	dirs := functionDirs(t)
	for _, f := range functions(t) {
		t.Run(f.LogicalID, func(t *testing.T) {
			dir, ok := dirs[f.LogicalID]
			if !ok {
				t.Fatalf("no build-%s target naming ./functions/<dir>", f.LogicalID)
			}
			fn, ok := devstack.Functions[f.LogicalID]
			if !ok {
				t.Fatalf("%s is not in devstack.Functions", f.LogicalID)
			}
			entry := runtime.FuncForPC(reflect.ValueOf(fn.Entry).Pointer()).Name() // .../internal/wire/paymentswire.PaymentsLambda
			called := checkMain(t, filepath.Join("functions", dir, "main.go"))
			if called != entry {
				t.Errorf("main.go starts %s; the local stack runs %s", called, entry)
			}
		})
	}
}

// checkMain returns the import-path-qualified entry point main.go calls, and
// fails on anything but the fixed shape.
func checkMain(t *testing.T, path string) string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]string{} // local name → path
	for _, im := range file.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	// The shared wire package (for Options) and the function's own builder
	// package under internal/wire.
	var allowed = []string{"context", "log/slog", "os", "github.com/aws/aws-lambda-go/lambda",
		"github.com/payreq/payreq/internal/wire"}
	for _, p := range imports {
		if !slices.Contains(allowed, p) && !strings.HasPrefix(p, "github.com/payreq/payreq/internal/wire/") {
			t.Errorf("%s imports %s: main.go may only start the entry point (adapters belong in internal/wire)", path, p)
		}
	}
	if len(file.Decls) != len(file.Imports) && len(file.Decls) != 2 {
		t.Errorf("%s declares more than func main", path)
	}
	var main *ast.FuncDecl
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			if fd.Name.Name != "main" || main != nil {
				t.Fatalf("%s declares func %s; only main is allowed", path, fd.Name.Name)
			}
			main = fd
		} else if gd := d.(*ast.GenDecl); gd.Tok != token.IMPORT {
			t.Fatalf("%s declares a %s; only main is allowed", path, gd.Tok)
		}
	}
	if main == nil || len(main.Body.List) != 3 {
		t.Fatalf("%s: main must be exactly `h, err := pkg.XLambda(...)`, `if err != nil {...}`, `lambda.Start(h)`", path)
	}
	// 1: h, err := pkg.Entry(context.Background(), os.Getenv, pkg.Options{})
	assign, ok := main.Body.List[0].(*ast.AssignStmt)
	if !ok || len(assign.Lhs) != 2 || len(assign.Rhs) != 1 {
		t.Fatalf("%s: first statement must be `h, err := pkg.XLambda(...)`", path)
	}
	call, ok := assign.Rhs[0].(*ast.CallExpr)
	sel, ok2 := call.Fun.(*ast.SelectorExpr)
	if !ok || !ok2 || len(call.Args) != 3 {
		t.Fatalf("%s: first statement must call pkg.XLambda(ctx, os.Getenv, pkg.Options{})", path)
	}
	pkg, _ := sel.X.(*ast.Ident)
	if pkg == nil || imports[pkg.Name] == "" {
		t.Fatalf("%s: entry point is not a package function", path)
	}
	if g, ok := call.Args[1].(*ast.SelectorExpr); !ok || g.Sel.Name != "Getenv" {
		t.Errorf("%s: the entry point must read os.Getenv", path)
	}
	if lit, ok := call.Args[2].(*ast.CompositeLit); !ok || len(lit.Elts) != 0 {
		t.Errorf("%s: the entry point must get zero Options (the runtime's AWS configuration)", path)
	}
	handler := assign.Lhs[0].(*ast.Ident).Name
	// 2: if err != nil { ... } without building anything.
	if _, ok := main.Body.List[1].(*ast.IfStmt); !ok {
		t.Errorf("%s: second statement must be the error check", path)
	}
	// 3: lambda.Start(h), h untouched.
	expr, ok := main.Body.List[2].(*ast.ExprStmt)
	start, ok2 := func() (*ast.CallExpr, bool) {
		if !ok {
			return nil, false
		}
		c, ok := expr.X.(*ast.CallExpr)
		return c, ok
	}()
	if !ok2 || len(start.Args) != 1 {
		t.Fatalf("%s: last statement must be lambda.Start(%s)", path, handler)
	}
	if s, ok := start.Fun.(*ast.SelectorExpr); !ok || s.Sel.Name != "Start" || imports[s.X.(*ast.Ident).Name] != "github.com/aws/aws-lambda-go/lambda" {
		t.Errorf("%s: last statement must be lambda.Start", path)
	}
	if arg, ok := start.Args[0].(*ast.Ident); !ok || arg.Name != handler {
		t.Errorf("%s: lambda.Start must get %s as built, not a wrapper or method of it", path, handler)
	}
	return imports[pkg.Name] + "." + sel.Sel.Name
}

// Every variable a function reads is declared in its template environment:
// each entry point is built with a getenv that records the names asked for,
// on the template's own values, and no code outside main.go reads the
// process environment directly.
func TestFunctionsReadOnlyTemplateVariables(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := tmpl.Functions()
	if err != nil {
		t.Fatal(err)
	}
	// Local values, as the local stack passes them, through parameters.
	r := &cfn.Resolver{T: tmpl, Params: map[string]string{"LocalStack": "1", "LocalSealKey": strings.Repeat("k", 64),
		"PublicBaseUrl": "http://127.0.0.1:3000"},
		Pseudo: map[string]string{"AWS::Region": "us-east-1", "AWS::StackName": "paydev", "AWS::AccountId": "000000000000",
			"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": ""},
		Ref:    func(id string) (string, error) { return "http://127.0.0.1:1/" + id, nil },
		GetAtt: func(id, attr string) (string, error) { return "arn:aws:local:" + id + ":" + attr, nil },
	}
	cfg := aws.Config{Region: "us-east-1"}
	for _, f := range fns {
		t.Run(f.LogicalID, func(t *testing.T) {
			env, err := f.ResolveEnv(r)
			if err != nil {
				t.Fatal(err)
			}
			var read []string
			getenv := func(k string) string {
				if _, declared := env[k]; !declared && !slices.Contains(read, k) {
					read = append(read, k)
				}
				return env[k]
			}
			if _, err := devstack.Functions[f.LogicalID].Build(context.Background(), getenv, &cfg); err != nil {
				t.Fatalf("build with the template environment: %v", err)
			}
			sort.Strings(read)
			if len(read) > 0 {
				t.Errorf("reads variables its template Environment does not declare: %v", read)
			}
		})
	}
	// The wiring reads its environment through getenv only.
	for _, pattern := range []string{"internal/wire/*.go", "internal/wire/*/*.go", "internal/config/*.go", "internal/secrets/*.go"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok {
						if x, ok := s.X.(*ast.Ident); ok && x.Name == "os" && (s.Sel.Name == "Getenv" || s.Sel.Name == "LookupEnv" || s.Sel.Name == "Environ") {
							t.Errorf("%s calls os.%s: functions read only their template environment, through getenv", path, s.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
}

package payreq_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testing/needs"
)

func functions(t *testing.T) []cfn.FunctionSpec {
	t.Helper()
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := tmpl.Functions()
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

// Every HTTP route in template.yaml is served by its function's handler, and
// every route a handler serves is declared in the template.
func TestTemplateRoutesMatchHandlers(t *testing.T) {
	declared := map[string]bool{}
	for _, f := range functions(t) {
		if len(f.Routes) == 0 {
			continue
		}
		declared[f.LogicalID] = true
		fn, ok := devstack.Functions[f.LogicalID]
		if !ok || fn.Routes == nil {
			t.Errorf("%s has HTTP routes in the template but no routes in devstack.Functions", f.LogicalID)
			continue
		}
		var inTemplate []string
		for _, r := range f.Routes {
			inTemplate = append(inTemplate, r.Pattern())
		}
		served := fn.Routes()
		slices.Sort(inTemplate)
		slices.Sort(served)
		for _, r := range inTemplate {
			if !slices.Contains(served, r) {
				t.Errorf("%s: template route %q has no handler", f.LogicalID, r)
			}
		}
		for _, r := range served {
			if !slices.Contains(inTemplate, r) {
				t.Errorf("%s: handler route %q is not declared in template.yaml", f.LogicalID, r)
			}
		}
	}
	for id, fn := range devstack.Functions {
		if fn.Routes != nil && !declared[id] {
			t.Errorf("devstack.Functions has routes for %s, which the template does not declare with routes", id)
		}
	}
}

// archiveCopy is the repository as `git archive` exports it (tracked files
// with their working-tree changes, nothing untracked): what sam build sees
// in a fresh clone, without this checkout's build outputs or node_modules.
func archiveCopy(t *testing.T) string {
	t.Helper()
	rev, err := exec.Command("git", "stash", "create").Output()
	if err != nil {
		t.Fatalf("git stash create: %v", err)
	}
	if strings.TrimSpace(string(rev)) == "" {
		rev = []byte("HEAD")
	}
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", strings.TrimSpace(string(rev)))
	extract := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	extract.Stdin = pipe
	if err := extract.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive: %v", err)
	}
	if err := extract.Wait(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	return dir
}

// Every function builds with the exact command sam build runs (the Makefile's
// build-<LogicalId> target), from a `git archive` copy of the repository,
// into a static linux/arm64 bootstrap of at most 15 MB.
func TestEveryFunctionBuildsForLambdaArm64(t *testing.T) {
	needs.External(t, "a linux/arm64 build of every function")
	src := archiveCopy(t)
	for _, f := range functions(t) {
		t.Run(f.LogicalID, func(t *testing.T) {
			if f.BuildMethod != "makefile" {
				t.Fatalf("BuildMethod = %q, want makefile", f.BuildMethod)
			}
			dir := t.TempDir()
			cmd := exec.Command("make", "--no-print-directory", "-C", src, "build-"+f.LogicalID, "ARTIFACTS_DIR="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make build-%s: %v\n%s", f.LogicalID, err, out)
			}
			path := filepath.Join(dir, "bootstrap")
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			bin, err := elf.Open(path)
			if err != nil {
				t.Fatalf("bootstrap is not an ELF binary: %v", err)
			}
			defer bin.Close()
			if bin.Machine != elf.EM_AARCH64 {
				t.Errorf("machine = %v, want EM_AARCH64", bin.Machine)
			}
			for _, p := range bin.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("bootstrap is dynamically linked; want CGO_ENABLED=0")
				}
			}
			if bin.Section(".symtab") != nil {
				t.Error("bootstrap is not stripped")
			}
			const limit = 15 << 20
			t.Logf("%s bootstrap: %.1f MB", f.LogicalID, float64(info.Size())/(1<<20))
			if info.Size() > limit {
				t.Errorf("bootstrap is %d bytes, limit %d", info.Size(), limit)
			}
		})
	}
}

func TestMakefileListsEveryFunction(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range functions(t) {
		if !strings.Contains(string(mk), "\nbuild-"+f.LogicalID+":") {
			t.Errorf("Makefile has no build-%s target", f.LogicalID)
		}
	}
}

// cfn-lint (AWS's linter, which runs the SAM transform) finds no error and
// no warning in the template. A missing cfn-lint fails the test: it is part
// of every machine's toolchain (.ci/run checks for it).
func TestTemplatePassesCfnLint(t *testing.T) {
	needs.External(t, "cfn-lint")
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatalf("cfn-lint is not on PATH (pip install cfn-lint): %v", err)
	}
	out, err := exec.Command(bin, "--format", "parseable", "template.yaml").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

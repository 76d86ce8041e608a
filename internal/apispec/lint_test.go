package apispec_test

import (
	"encoding/json"
	"github.com/payreq/payreq/internal/testing/needs"
	"testing"
)

// Redocly CLI (recommended rules, docs/redocly.yaml) finds no error and no
// warning in docs/openapi.yaml. The deliberate exceptions are listed one by
// one in docs/.redocly.lint-ignore.yaml and reported as ignored, not passed.
func TestSpecPassesRedoclyLint(t *testing.T) {
	needs.External(t, "redocly from infra/local (npm ci)")
	out, err := nodeTool(t, "redocly", "lint", "--config", "docs/redocly.yaml", "--format", "json", "docs/openapi.yaml")
	var report struct {
		Totals   struct{ Errors, Warnings, Ignored int }
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct{ Pointer string }
		}
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint: %v (exit: %v)\n%s", jerr, err, out)
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("redocly %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if report.Totals.Errors != 0 || report.Totals.Warnings != 0 || err != nil {
		t.Fatalf("redocly lint: %d errors, %d warnings (exit: %v)", report.Totals.Errors, report.Totals.Warnings, err)
	}
}

// Spectral with a ruleset that extends spectral:oas (docs/.spectral.yaml)
// reports nothing at all, not even a hint.
func TestSpecPassesSpectralLint(t *testing.T) {
	needs.External(t, "spectral from infra/local (npm ci)")
	out, err := nodeTool(t, "spectral", "lint", "--ruleset", "docs/.spectral.yaml", "--format", "json",
		"--fail-severity", "hint", "--quiet", "docs/openapi.yaml")
	var results []struct {
		Code     string
		Message  string
		Severity int
		Path     []any
	}
	if jerr := json.Unmarshal(out, &results); jerr != nil {
		t.Fatalf("spectral lint: %v (exit: %v)\n%s", jerr, err, out)
	}
	for _, r := range results {
		t.Errorf("spectral %s (severity %d) at %v: %s", r.Code, r.Severity, r.Path, r.Message)
	}
	if err != nil {
		t.Fatalf("spectral lint failed: %v", err)
	}
}

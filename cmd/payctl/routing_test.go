package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/testenv"
)

const rulesJSON = `{"rules": [
  {"name": "large EUR cards", "methods": ["card"], "currencies": ["EUR"], "minAmount": "500.00", "connector": "adyen"},
  {"cardBrands": ["amex"], "split": [{"connector": "stripe", "weight": 80}, {"connector": "adyen", "weight": 20}]}
], "default": "stripe"}`

// payctl routing set validates the file (every problem listed, nothing
// written), stores the rules with the merchant, and the same update sent
// 30 times at once is written once: one configuration, one new version.
func TestRoutingSetShowAndThirtyAtOnce(t *testing.T) {
	m := testenv.NewMerchant(t)
	st := testenv.Stack(t).Store
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", `{"rules": [{"methods": ["cash"], "minAmount": "9", "maxAmount": "1", "connector": "Adyen"}]}`)
	if _, stderr, code := payctl(t, "routing", "set", "--merchant", m.ID, "--file", bad); code != 1 ||
		!strings.Contains(stderr, "rules[0].methods") || !strings.Contains(stderr, "rules[0].maxAmount") || !strings.Contains(stderr, "rules[0].connector") {
		t.Fatalf("invalid rules: exit %d %s", code, stderr)
	}
	typo := write("typo.json", `{"rules": [{"currency": ["EUR"], "connector": "adyen"}]}`)
	if _, stderr, code := payctl(t, "routing", "set", "--merchant", m.ID, "--file", typo); code != 1 || !strings.Contains(stderr, "currency") {
		t.Fatalf("unknown field: exit %d %s", code, stderr)
	}
	start, err := st.Merchant(context.Background(), m.ID)
	if err != nil || !start.Routing.Empty() {
		t.Fatalf("after refused sets: %+v %v", start.Routing, err)
	}

	good := write("good.json", rulesJSON)
	const n = 30
	var wg sync.WaitGroup
	changed := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"--local", "--state-dir", testenv.StateDir(t), "routing", "set", "--merchant", m.ID, "--file", good}, &stdout, &stderr)
			var v routingView
			if code != 0 || json.Unmarshal(stdout.Bytes(), &v) != nil {
				t.Errorf("set %d: exit %d %s %s", i, code, stdout.String(), stderr.String())
				return
			}
			changed[i] = v.Changed
		}()
	}
	wg.Wait()
	writes := 0
	for _, c := range changed {
		if c {
			writes++
		}
	}
	got, err := st.Merchant(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if writes != 1 || got.Version != start.Version+1 {
		t.Fatalf("30 identical sets: %d writes, version %d → %d; want one write", writes, start.Version, got.Version)
	}
	want, err := parseRules(strings.NewReader(rulesJSON))
	if err != nil || !got.Routing.Equal(want) {
		t.Fatalf("stored %+v, want %+v (%v)", got.Routing, want, err)
	}
	if got.Name != start.Name || got.APIKeyHash != start.APIKeyHash {
		t.Fatal("setting the routing changed other settings")
	}

	out, stderr, code := payctl(t, "routing", "show", "--merchant", m.ID)
	rules, _ := out["routing"].(map[string]any)
	if code != 0 || rules["default"] != "stripe" || len(rules["rules"].([]any)) != 2 {
		t.Fatalf("show: exit %d %v %s", code, out, stderr)
	}
	first := rules["rules"].([]any)[0].(map[string]any)
	if first["minAmount"] != "500" && first["minAmount"] != "500.00" {
		t.Fatalf("minAmount shown as %v (%T), want a decimal string", first["minAmount"], first["minAmount"])
	}

	// An empty file removes the routing.
	if _, stderr, code := payctl(t, "routing", "set", "--merchant", m.ID, "--file", write("none.json", `{"rules": []}`)); code != 0 {
		t.Fatalf("clear: exit %d %s", code, stderr)
	}
	if got, _ := st.Merchant(context.Background(), m.ID); !got.Routing.Empty() {
		t.Fatalf("after clearing: %+v", got.Routing)
	}
}

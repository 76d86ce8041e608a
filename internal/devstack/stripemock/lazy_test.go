package stripemock_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/testing/needs"
)

// Lazy starts stripe-mock only at the first request, then answers as it:
// the balance of a test key (what an account check reads).
func TestLazyStartsStripeMockAtTheFirstRequest(t *testing.T) {
	needs.External(t, "stripe-mock")
	dir := t.TempDir()
	base, stop, err := stripemock.Lazy(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if out, _ := exec.Command("pgrep", "-f", "-a", "stripe-mock.*"+dir).Output(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("stripe-mock runs before any request: %s", out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer sk_test_lazy123")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/balance through Lazy: %d", resp.StatusCode)
	}
}

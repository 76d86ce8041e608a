package devstack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/payreq/payreq/internal/devstack"
)

// TestFaultProxyOverHTTP: the proxy's HTTP face arms a fault that a stack
// in another process meets: the second PutItem on a table is applied
// upstream and its answer lost; a transaction conflict never reaches
// upstream; reads pass; a disarmed proxy changes nothing. (The faults'
// effect on DynamoDB Local and the SDK's retries: internal/dynamo's
// TestLostAnswer* tests.)
func TestFaultProxyOverHTTP(t *testing.T) {
	var reached atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	defer upstream.Close()
	p, err := devstack.StartFaultProxy(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	call := func(op, body string) (int, string) {
		req, _ := http.NewRequest("POST", p.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	control := func(method, path, body string) int {
		req, _ := http.NewRequest(method, p.URL+"/_payreq/faults"+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := control("POST", "", `{"kind":"lose-answer","op":"PutItem","table":"shop-Ops","nth":2}`); c != http.StatusCreated {
		t.Fatalf("arm: %d", c)
	}
	if c := control("POST", "", `{"kind":"melt"}`); c != http.StatusBadRequest {
		t.Fatalf("an unknown fault: %d", c)
	}
	control("POST", "/record", "")
	put := `{"TableName":"shop-OpsTable","Item":{"pk":{"S":"a"}}}`
	if c, _ := call("GetItem", `{"TableName":"shop-OpsTable"}`); c != 200 {
		t.Fatalf("a read: %d", c)
	}
	if c, _ := call("PutItem", `{"TableName":"other-OpsTable","Item":{"pk":{"S":"a"}}}`); c != 200 {
		t.Fatalf("another table's put: %d", c)
	}
	if c, _ := call("PutItem", put); c != 200 {
		t.Fatalf("the first matching put: %d", c)
	}
	before := reached.Load()
	if c, b := call("PutItem", put); c != 500 || !strings.Contains(b, "InternalServerError") || reached.Load() != before+1 {
		t.Fatalf("the second matching put: %d %s, reached upstream %d times (want its write applied, its answer lost)", c, b, reached.Load()-before)
	}
	if c, _ := call("PutItem", put); c != 200 {
		t.Fatalf("after the fault fired: %d", c)
	}

	control("POST", "", `{"kind":"transaction-conflict"}`)
	before = reached.Load()
	c, b := call("TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"shop-OpsTable"}},{"Update":{"TableName":"shop-Tx"}}]}`)
	var tc struct {
		Type    string                  `json:"__type"`
		Reasons []struct{ Code string } `json:"CancellationReasons"`
	}
	_ = json.Unmarshal([]byte(b), &tc)
	if c != 400 || !strings.HasSuffix(tc.Type, "TransactionCanceledException") || len(tc.Reasons) != 2 ||
		tc.Reasons[0].Code != "TransactionConflict" || tc.Reasons[1].Code != "None" || reached.Load() != before {
		t.Fatalf("conflict: %d %s (upstream reached %d times)", c, b, reached.Load()-before)
	}

	resp, err := http.Get(p.URL + "/_payreq/faults/writes")
	if err != nil {
		t.Fatal(err)
	}
	var writes []devstack.Write
	_ = json.NewDecoder(resp.Body).Decode(&writes)
	resp.Body.Close()
	if len(writes) != 5 || writes[2].Fault != devstack.FaultLoseAnswer || writes[4].Fault != devstack.FaultTransactionConflict || writes[4].Tables[1] != "shop-Tx" {
		t.Fatalf("writes recorded: %+v", writes)
	}

	control("POST", "", `{"kind":"lose-answer"}`)
	if c := control("DELETE", "", ""); c != http.StatusNoContent {
		t.Fatalf("disarm: %d", c)
	}
	if c, _ := call("PutItem", put); c != 200 {
		t.Fatalf("a disarmed proxy: %d", c)
	}
}

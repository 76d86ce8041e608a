package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultProxy stands in front of the local DynamoDB and makes the two faults
// AWS makes and no emulator does (docs/lost-answers.md):
//
//   - a lost answer: the write reaches the emulator and is applied, and the
//     client gets 500 InternalServerError (or a dropped connection) instead
//     of the emulator's answer, so the SDK sends the same call again and
//     meets its own write;
//   - a transaction conflict: a TransactWriteItems is answered
//     TransactionCanceledException with reason TransactionConflict, without
//     reaching the emulator, as DynamoDB answers a transaction that met
//     another one working on the same item.
//
// Faults are armed in process (Arm) or over HTTP on the proxy's own address
// (POST /_payreq/faults with a Fault as JSON; DELETE to disarm; GET
// /_payreq/faults/writes for the writes recorded), so a stack in another
// process (the crash tests, make chaos) can be driven too. Reads pass
// through untouched.
type FaultProxy struct {
	URL string

	upstream *url.URL
	proxy    *httputil.ReverseProxy
	srv      *http.Server

	mu     sync.Mutex
	armed  []*armedFault
	writes []Write
	record bool
}

// Fault is one planned failure: the Nth write from now that matches Op,
// Table and Contains (1 = the next), and Times matching writes from there
// (default 1).
type Fault struct {
	// Kind is FaultLoseAnswer or FaultTransactionConflict.
	Kind string `json:"kind"`
	// Op is a DynamoDB write operation (PutItem, UpdateItem, DeleteItem,
	// TransactWriteItems, BatchWriteItem); empty matches every write.
	// A transaction conflict matches TransactWriteItems only.
	Op string `json:"op,omitempty"`
	// Table matches a write that names a table containing it (a stack's
	// tables share its name as a prefix); empty matches every table.
	Table string `json:"table,omitempty"`
	// Tables, when set, matches a write that names exactly these tables,
	// in this order (Write.Tables of a recorded write): the k-th write of
	// one kind, however other writes interleave.
	Tables []string `json:"tables,omitempty"`
	// Contains matches a write whose request body contains it (a
	// merchant's id, say); empty matches every body.
	Contains string `json:"contains,omitempty"`
	Nth      int    `json:"nth"`
	Times    int    `json:"times,omitempty"`
	// Drop loses the answer by closing the connection instead of
	// answering 500.
	Drop bool `json:"drop,omitempty"`
}

// Fault kinds.
const (
	FaultLoseAnswer          = "lose-answer"
	FaultTransactionConflict = "transaction-conflict"
)

// Write is one write the proxy saw while recording.
type Write struct {
	Op     string   `json:"op"`
	Tables []string `json:"tables"`
	// Key names the item (the first action's, for a transaction): its key
	// attributes as sent, for people reading a sweep's log.
	Key string `json:"key"`
	// Fault is the fault applied to it, if any.
	Fault string `json:"fault,omitempty"`
	At    time.Time
}

type armedFault struct {
	Fault
	seen  int
	fired int
	done  chan struct{}
}

// Armed is a fault waiting for its write.
type Armed struct {
	p *FaultProxy
	f *armedFault
}

// Fired is how many writes the fault has been applied to so far.
func (a *Armed) Fired() int {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	return a.f.fired
}

// Done is closed once the fault has been applied Times times.
func (a *Armed) Done() <-chan struct{} { return a.f.done }

// writeOps are the DynamoDB operations that change data.
var writeOps = []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}

const faultsPath = "/_payreq/faults"

// StartFaultProxy listens on a free loopback port and forwards to upstream
// (a DynamoDB endpoint URL).
func StartFaultProxy(upstream string) (*FaultProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("fault proxy upstream %q: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{URL: "http://" + ln.Addr().String(), upstream: u}
	p.proxy = httputil.NewSingleHostReverseProxy(u)
	p.proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	p.proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, "fault proxy: "+err.Error(), http.StatusBadGateway)
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy.
func (p *FaultProxy) Close() { _ = p.srv.Close() }

// Arm plans f. Faults armed together count writes independently.
func (p *FaultProxy) Arm(f Fault) (*Armed, error) {
	if f.Kind != FaultLoseAnswer && f.Kind != FaultTransactionConflict {
		return nil, fmt.Errorf("fault kind %q: want %q or %q", f.Kind, FaultLoseAnswer, FaultTransactionConflict)
	}
	if f.Op != "" && !slices.Contains(writeOps, f.Op) {
		return nil, fmt.Errorf("fault op %q: want one of %v", f.Op, writeOps)
	}
	if f.Kind == FaultTransactionConflict {
		f.Op = "TransactWriteItems"
	}
	if f.Nth < 1 {
		f.Nth = 1
	}
	if f.Times < 1 {
		f.Times = 1
	}
	a := &armedFault{Fault: f, done: make(chan struct{})}
	p.mu.Lock()
	p.armed = append(p.armed, a)
	p.mu.Unlock()
	return &Armed{p: p, f: a}, nil
}

// Pending is how many armed faults have not fired yet.
func (p *FaultProxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.armed)
}

// Disarm drops every planned fault.
func (p *FaultProxy) Disarm() {
	p.mu.Lock()
	p.armed = nil
	p.mu.Unlock()
}

// Record starts recording writes afresh (Writes returns them).
func (p *FaultProxy) Record() {
	p.mu.Lock()
	p.writes, p.record = nil, true
	p.mu.Unlock()
}

// Writes returns the writes recorded since Record.
func (p *FaultProxy) Writes() []Write {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, faultsPath) {
		p.control(w, r)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if !slices.Contains(writeOps, op) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	tables, key := describeWrite(op, body)
	fault := p.match(op, tables, body)
	if p.recording() {
		p.mu.Lock()
		p.writes = append(p.writes, Write{Op: op, Tables: tables, Key: key, Fault: kindOf(fault), At: time.Now()})
		p.mu.Unlock()
	}
	switch {
	case fault == nil:
		p.proxy.ServeHTTP(w, r)
	case fault.Kind == FaultTransactionConflict:
		n := max(transactActions(body), 1)
		reasons := make([]map[string]string, n)
		reasons[0] = map[string]string{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
		codes := []string{"TransactionConflict"}
		for i := 1; i < n; i++ {
			reasons[i] = map[string]string{"Code": "None"}
			codes = append(codes, "None")
		}
		b, _ := json.Marshal(map[string]any{
			"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
			"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
			"CancellationReasons": reasons,
		})
		answer(w, http.StatusBadRequest, b)
	default: // lose the answer: the emulator applies the write, the client never hears
		rec := &discardWriter{h: http.Header{}}
		p.proxy.ServeHTTP(rec, r)
		if fault.Drop {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
		}
		answer(w, http.StatusInternalServerError,
			[]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error (the local fault proxy lost the answer of a write it applied)"}`))
	}
}

// answer writes an error as DynamoDB does, with the CRC32 of the body in
// X-Amz-Crc32 (the SDK checks it, and warned of a mismatch on every
// injected fault when it was missing).
func answer(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func kindOf(f *Fault) string {
	if f == nil {
		return ""
	}
	return f.Kind
}

func (p *FaultProxy) recording() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.record
}

// match counts the write against every armed fault and returns the one to
// apply, if any.
func (p *FaultProxy) match(op string, tables []string, body []byte) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hit *Fault
	keep := p.armed[:0]
	for _, a := range p.armed {
		matches := (a.Op == "" || a.Op == op) &&
			(a.Table == "" || slices.ContainsFunc(tables, func(t string) bool { return strings.Contains(t, a.Table) })) &&
			(a.Tables == nil || slices.Equal(a.Tables, tables)) &&
			(a.Contains == "" || bytes.Contains(body, []byte(a.Contains)))
		if matches {
			a.seen++
			if a.seen >= a.Nth && hit == nil {
				a.fired++
				f := a.Fault
				hit = &f
			}
		}
		if a.fired >= a.Times {
			close(a.done)
			continue
		}
		keep = append(keep, a)
	}
	p.armed = keep
	return hit
}

// describeWrite names the tables a write touches and its (first) item's key.
func describeWrite(op string, body []byte) ([]string, string) {
	var req struct {
		TableName     string
		Key, Item     map[string]map[string]any
		TransactItems []map[string]struct {
			TableName string
			Key, Item map[string]map[string]any
		}
		RequestItems map[string]json.RawMessage
	}
	_ = json.Unmarshal(body, &req)
	switch op {
	case "TransactWriteItems":
		var tables []string
		key := ""
		for _, it := range req.TransactItems {
			for _, a := range it {
				if !slices.Contains(tables, a.TableName) {
					tables = append(tables, a.TableName)
				}
				if key == "" {
					key = keyOf(a.Key, a.Item)
				}
			}
		}
		return tables, key
	case "BatchWriteItem":
		var tables []string
		for t := range req.RequestItems {
			tables = append(tables, t)
		}
		slices.Sort(tables)
		key := ""
		if len(tables) > 0 { // the first request's key, to tell whose batch it is
			var reqs []struct {
				PutRequest    *struct{ Item map[string]map[string]any }
				DeleteRequest *struct{ Key map[string]map[string]any }
			}
			_ = json.Unmarshal(req.RequestItems[tables[0]], &reqs)
			if len(reqs) > 0 && reqs[0].PutRequest != nil {
				key = keyOf(nil, reqs[0].PutRequest.Item)
			} else if len(reqs) > 0 && reqs[0].DeleteRequest != nil {
				key = keyOf(reqs[0].DeleteRequest.Key, nil)
			}
		}
		return tables, key
	default:
		return []string{req.TableName}, keyOf(req.Key, req.Item)
	}
}

// keyOf shows the usual key attributes of the service's tables.
func keyOf(key, item map[string]map[string]any) string {
	src := key
	if src == nil {
		src = item
	}
	var parts []string
	for _, name := range []string{"pk", "sk", "id", "merchantId"} {
		if v, ok := src[name]; ok {
			for _, x := range v {
				parts = append(parts, fmt.Sprintf("%s=%v", name, x))
			}
		}
	}
	return strings.Join(parts, " ")
}

func transactActions(body []byte) int {
	var req struct{ TransactItems []json.RawMessage }
	_ = json.Unmarshal(body, &req)
	return len(req.TransactItems)
}

// control serves the HTTP face of Arm, Disarm, Record and Writes.
func (p *FaultProxy) control(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == faultsPath:
		var f Fault
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
			http.Error(w, `{"error":"body: a Fault as JSON"}`, http.StatusBadRequest)
			return
		}
		if _, err := p.Arm(f); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(f)
	case r.Method == http.MethodDelete && r.URL.Path == faultsPath:
		p.Disarm()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && r.URL.Path == faultsPath+"/record":
		p.Record()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && r.URL.Path == faultsPath+"/writes":
		_ = json.NewEncoder(w).Encode(p.Writes())
	default:
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
	}
}

// discardWriter takes the emulator's answer of a write whose answer is lost.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(s int)           { d.status = s }

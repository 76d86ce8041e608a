//go:build volume

package auditwire_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
	"github.com/payreq/payreq/internal/testenv"
)

func init() { volume = true }

// TestAuditAtVolume seeds PAYREQ_AUDIT_ROWS paid payments (default
// 1,000,000: a paid request, its approved transaction with its outbox
// entry, its sandbox ledger charge) straight into the tables with
// BatchWriteItem while the stack's stream poller hands every change to
// AuditFunction, and then invokes the scheduled run as the schedule would,
// each with the function's timeout: the incremental audit keeps up, a
// violation written after the last row is reported, and the full pass
// finishes in a bounded number of invocations. `make audit-million`;
// numbers in docs/operations.md.
func TestAuditAtVolume(t *testing.T) {
	rows := 1_000_000
	if v := os.Getenv("PAYREQ_AUDIT_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PAYREQ_AUDIT_ROWS=%q", v)
		}
		rows = n
	}
	st := testenv.Stack(t)
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 20 })
	a := auditor(t)
	store := a.Store
	const timeout = 60 * time.Second // AuditFunction's Timeout (template.yaml)

	// Heap of the process, sampled: the stack's emulators run apart, so
	// this is the audit's (and the seeder's while it runs) memory.
	var peak atomic.Uint64
	stopSample := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stopSample:
				return
			case <-time.After(100 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if h := ms.HeapInuse + ms.StackInuse; h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	defer close(stopSample)

	// The stream consumer, as the event source mappings run it.
	srcs, err := st.Resources.StreamSources()
	if err != nil {
		t.Fatal(err)
	}
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(st.Info.Endpoints.DynamoDB) })
	var (
		streamCalls, streamRecords atomic.Int64
		streamMax                  atomic.Int64 // ns
	)
	h := lambda.NewHandler(func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := a.Stream(ctx, ev)
		d := int64(time.Since(start))
		for {
			if m := streamMax.Load(); d <= m || streamMax.CompareAndSwap(m, d) {
				break
			}
		}
		streamCalls.Add(1)
		streamRecords.Add(int64(len(ev.Records)))
		return resp, err
	})
	pollCtx, stopPoll := context.WithCancel(ctx)
	var polls sync.WaitGroup
	for _, src := range srcs {
		if src.FunctionID != "AuditFunction" {
			continue
		}
		polls.Add(1)
		go func() {
			defer polls.Done()
			devstack.PollStream(pollCtx, streams, nil, src, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
	}
	defer func() { stopPoll(); polls.Wait() }()

	// Seed.
	base := time.Now().UnixNano() / 1000 % 1_000_000_000 * 1000 // ids clear of the stack's own
	now := time.Now().UTC()
	tb := st.Info.Tables
	seedStart := time.Now()
	jobs := make(chan int)
	var seedErr atomic.Value
	var seeders sync.WaitGroup
	for w := 0; w < 8; w++ {
		seeders.Add(1)
		go func() {
			defer seeders.Done()
			for first := range jobs {
				if err := seedChunk(ctx, db, tb, base, first, min(first+25, rows), now); err != nil {
					seedErr.Store(err)
				}
			}
		}()
	}
	for i := 0; i < rows; i += 25 {
		if seedErr.Load() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	seeders.Wait()
	if err := seedErr.Load(); err != nil {
		t.Fatal(err)
	}
	seeded := time.Since(seedStart)
	t.Logf("seeded %d payments (%d items) in %v", rows, 3*rows, seeded.Round(time.Second))

	// The violation after the last row: a declined transaction's request
	// marked paid, naming it.
	bad := base + int64(rows) + 1
	writeBroken(ctx, t, db, tb, bad, now)
	planted := time.Now()

	// Scheduled runs, one after another, as the one-minute schedule would
	// (back to back: the local clock is not waited for).
	var (
		runs          int
		runMax        time.Duration
		reportedAfter time.Duration
		passStarted   int64
		passDone      bool
		judged        int
	)
	a.Metrics = func(audit.RunMetrics) error { return nil }
	deadline := time.Now().Add(6 * time.Hour)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		rs, err := a.Scheduled(rctx)
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", runs+1, err)
		}
		runs++
		runMax = max(runMax, took)
		judged += rs.Judged
		if took > timeout {
			t.Fatalf("run %d took %v, timeout %v", runs, took, timeout)
		}
		if passStarted == 0 {
			passStarted = rs.Pass.ID
		}
		if reportedAfter == 0 && len(openViolations(t, store, bad)) > 0 {
			reportedAfter = time.Since(planted)
		}
		if runs%10 == 0 || !rs.Pass.Running {
			t.Logf("run %d: %v, judged %d, pass %.1f%% (%d items read), stream lag %v, check lag %v, stream batches %d (%d records), heap peak %d MiB",
				runs, took.Round(time.Millisecond), rs.Judged, rs.Pass.Percent(), rs.Pass.Scanned(), rs.StreamLag.Round(time.Second),
				rs.CheckLag.Round(time.Second), streamCalls.Load(), streamRecords.Load(), peak.Load()>>20)
		}
		if !rs.Pass.Running && rs.Pass.LastStartedAt.UnixMilli() == passStarted && rs.Pass.LastScanned > 0 {
			passDone = true
		}
		// Caught up: the pass finished, the violation reported, no due
		// check left and the stream read to the heartbeat.
		if passDone && reportedAfter > 0 && rs.CheckLag == 0 && rs.StreamLag < 10*time.Second {
			if dues, err := store.DueChecks(ctx, time.Now().Add(time.Hour), 1); err == nil && len(dues) == 0 {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !passDone || reportedAfter == 0 {
		t.Fatalf("after %d runs: pass finished %v, violation reported %v", runs, passDone, reportedAfter > 0)
	}
	total := time.Since(seedStart)
	t.Logf("RESULT rows=%d seed=%v runs=%d (longest %v, timeout %v) judged=%d stream batches=%d records=%d (longest %v) violation reported %v after its write; all caught up %v after the first row; peak heap %d MiB (function memory 256 MB)",
		rows, seeded.Round(time.Second), runs, runMax.Round(time.Millisecond), timeout, judged, streamCalls.Load(), streamRecords.Load(),
		time.Duration(streamMax.Load()).Round(time.Millisecond), reportedAfter.Round(time.Second), total.Round(time.Second), peak.Load()>>20)
	if v := openViolations(t, store, bad); len(v) != 1 || v[0].Invariant != audit.PaidRequestHasApprovedTx {
		t.Fatalf("violations of the planted request: %+v", v)
	}
	if peak.Load() > 256<<20 {
		t.Errorf("peak heap %d MiB over the function's 256 MB", peak.Load()>>20)
	}
}

// seedChunk writes payments [first, last): each a paid request, its
// approved transaction (with the outbox entry the notifier would take;
// no shard attribute, so the notifier never sees it) and its ledger charge.
func seedChunk(ctx context.Context, db *dynamodb.Client, tb map[string]string, base int64, first, last int, now time.Time) error {
	var reqs, txs, ops []types.WriteRequest
	for i := first; i < last; i++ {
		id := base + int64(i)
		at := now.Add(-time.Duration(last-i) * time.Millisecond)
		st := payment.TxApproved
		tx := &payment.Transaction{ID: id, Number: "T" + strconv.FormatInt(id, 10), PaymentRequestID: id, MerchantID: "mer_volume",
			Status: st, Method: "card", Amount: decimal.RequireFromString("4.20"), Unit: "EUR", Reference: payment.ChargeReference(id),
			CreatedAt: at, UpdatedAt: at, SettledAt: &at}
		ti, err := dynamo.TransactionItem(tx)
		if err != nil {
			return err
		}
		ti["notifyEvent"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"eventId": &types.AttributeValueMemberS{Value: "evt_" + strconv.FormatInt(id, 10) + "_1"}}}
		tid := id
		r := &payment.Request{ID: id, MerchantID: "mer_volume", Amount: decimal.RequireFromString("4.20"), Unit: "EUR",
			Status: payment.RequestPaid, TransactionID: tid, CreatedAt: at, UpdatedAt: at, Version: 3}
		ri, err := dynamo.RequestItem(r)
		if err != nil {
			return err
		}
		li, err := dynamo.LedgerItem(ledger.Entry{Reference: payment.ChargeReference(id), Kind: ledger.KindCharge,
			TransactionID: id, Method: "card", Amount: "4.20", Unit: "EUR", Status: provider.Approved, CreatedAt: at, UpdatedAt: at})
		if err != nil {
			return err
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: ri}})
		txs = append(txs, types.WriteRequest{PutRequest: &types.PutRequest{Item: ti}})
		ops = append(ops, types.WriteRequest{PutRequest: &types.PutRequest{Item: li}})
	}
	for table, items := range map[string][]types.WriteRequest{tb["PaymentRequestsTable"]: reqs, tb["TransactionsTable"]: txs, tb["OperationsTable"]: ops} {
		for try := 0; len(items) > 0; try++ {
			if try > 20 {
				return io.ErrNoProgress
			}
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: items}})
			if err != nil {
				return err
			}
			items = out.UnprocessedItems[table]
			if len(items) > 0 {
				time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
			}
		}
	}
	return nil
}

// writeBroken writes a declined transaction and its request marked paid,
// naming it: paid_request_has_approved_transaction.
func writeBroken(ctx context.Context, t *testing.T, db *dynamodb.Client, tb map[string]string, id int64, now time.Time) {
	t.Helper()
	tx := &payment.Transaction{ID: id, Number: "T" + strconv.FormatInt(id, 10), PaymentRequestID: id, MerchantID: "mer_volume",
		Status: payment.TxDeclined, Method: "card", Amount: decimal.RequireFromString("4.20"), Unit: "EUR", Reference: payment.ChargeReference(id),
		CreatedAt: now, UpdatedAt: now, SettledAt: &now}
	ti, err := dynamo.TransactionItem(tx)
	if err != nil {
		t.Fatal(err)
	}
	ti["notifyEvent"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"eventId": &types.AttributeValueMemberS{Value: "evt_" + strconv.FormatInt(id, 10) + "_2"}}}
	tid := id
	ri, err := dynamo.RequestItem(&payment.Request{ID: id, MerchantID: "mer_volume", Amount: decimal.RequireFromString("4.20"), Unit: "EUR",
		Status: payment.RequestPaid, TransactionID: tid, CreatedAt: now, UpdatedAt: time.Now().UTC(), Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	for table, item := range map[string]map[string]types.AttributeValue{tb["TransactionsTable"]: ti, tb["PaymentRequestsTable"]: ri} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

package dynamo_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
	"github.com/payreq/payreq/internal/testenv"
)

// The full pass on DynamoDB: a few pages per step when the budget is short,
// its cursors kept in the operations table, so that another invocation (a
// new store, as a new Lambda instance would have) continues where the
// last one stopped; it finishes in a bounded number of steps and finds a
// violation planted among the payments. (AuditFunction does not run in
// this package's stack: the steps here are the only ones.)
func TestFullPassContinuesFromItsCheckpointOnDynamoDB(t *testing.T) {
	st := testenv.Stack(t)
	ctx := context.Background()
	_, _, client, _ := newStore(t)
	tb := st.Info.Tables
	base := time.Now().UnixNano() / 1000 % 1_000_000_000 * 1000
	at := time.Now().UTC()
	const n = 200
	put := func(table string, item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i <= n; i++ {
		id := base + int64(i)
		status := payment.TxApproved
		if i == n {
			status = payment.TxDeclined // the planted one: its request says paid
		}
		ti, err := dynamo.TransactionItem(&payment.Transaction{ID: id, Number: "P" + strconv.FormatInt(id, 10), PaymentRequestID: id, MerchantID: "mer_pass", Status: status, Method: "card",
			Amount: decimal.RequireFromString("1.00"), Unit: "EUR", Reference: payment.ChargeReference(id), CreatedAt: at, UpdatedAt: at, SettledAt: &at})
		if err != nil {
			t.Fatal(err)
		}
		ti["notifyEvent"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"eventId": &types.AttributeValueMemberS{Value: "evt_" + strconv.FormatInt(id, 10) + "_" + strconv.Itoa(int(status))}}}
		ri, err := dynamo.RequestItem(&payment.Request{ID: id, MerchantID: "mer_pass", Amount: decimal.RequireFromString("1.00"), Unit: "EUR",
			Status: payment.RequestPaid, TransactionID: id, CreatedAt: at, UpdatedAt: at, Version: 3})
		if err != nil {
			t.Fatal(err)
		}
		put(tb["TransactionsTable"], ti)
		put(tb["PaymentRequestsTable"], ri)
		if status == payment.TxApproved {
			li, err := dynamo.LedgerItem(ledger.Entry{Reference: payment.ChargeReference(id), Kind: ledger.KindCharge, TransactionID: id,
				Method: "card", Amount: "1.00", Unit: "EUR", Status: provider.Approved, CreatedAt: at, UpdatedAt: at})
			if err != nil {
				t.Fatal(err)
			}
			put(tb["OperationsTable"], li)
		}
	}
	bad := audit.RequestSubject(base + n)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now().Add(audit.DefaultGrace + time.Minute) // past the grace of every write above
	invocation := func() (*audit.Passer, *audit.Settler, *dynamo.AuditStore) {
		a := testenv.PatientStore(t, st).Audit()
		s := &audit.Settler{Findings: a, Checks: a, Log: quiet}
		if _, err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return &audit.Passer{Store: a, Judge: a.Judge(audit.DefaultGrace, true), Tables: audit.PassTables(true), Segments: 2,
			Every: time.Nanosecond, PageSize: 25, Workers: 1, JudgeConcurrency: 4}, s, a
	}
	p, settler, a := invocation()
	var (
		pass    audit.Pass
		started int64
		steps   int
		scanned []int64
	)
	for steps = 1; steps <= 2_000; steps++ {
		if steps%5 == 0 {
			p, settler, a = invocation() // a new instance: only the checkpoint carries over
		}
		var err error
		// A budget of 200 ms: a step reads a page or a few (the
		// checkpoint's read and write take part of it).
		pass, err = p.Step(ctx, now, time.Now().Add(200*time.Millisecond), func(v audit.Verdict) error { return settler.Settle(ctx, v, now) })
		if err != nil {
			t.Fatal(err)
		}
		if started == 0 {
			started = pass.ID
		}
		if !pass.Running && pass.LastStartedAt.UnixMilli() == started {
			break
		}
		if pass.ID != started {
			t.Fatalf("step %d: pass %d, started %d: not continued", steps, pass.ID, started)
		}
		scanned = append(scanned, pass.Scanned())
	}
	if pass.Running || steps < 3 {
		t.Fatalf("pass finished after %d steps (running %v): not bounded per step", steps, pass.Running)
	}
	for i := 1; i < len(scanned); i++ {
		if scanned[i] < scanned[i-1] {
			t.Fatalf("step %d went back (%d then %d items): a step did not continue from the checkpoint", i+1, scanned[i-1], scanned[i])
		}
	}
	if min := int64(3*n - 1); pass.LastScanned < min {
		t.Fatalf("pass read %d items, at least %d seeded", pass.LastScanned, min)
	}
	// Bounded: a step that starts in its budget reads at least a page of
	// 25 (a busy machine may spend a step's budget on the checkpoint).
	if limit := 3*(int(pass.LastScanned)/25+3*2) + 10; steps > limit {
		t.Fatalf("%d steps for %d items at 25 a page: more than %d", steps, pass.LastScanned, limit)
	}
	t.Logf("full pass: %d items in %d steps", pass.LastScanned, steps)
	open, err := a.OpenViolations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, v := range open {
		if v.Subject == bad.Key() && v.Invariant == audit.PaidRequestHasApprovedTx {
			found++
		}
		if v.PaymentRequestID >= base && v.PaymentRequestID < base+n {
			t.Errorf("a clean seeded payment reported: %+v", v)
		}
	}
	if found != 1 {
		t.Fatalf("planted violation recorded %d times: %+v", found, open)
	}
}

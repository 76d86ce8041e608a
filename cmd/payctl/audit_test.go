package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
	"github.com/payreq/payreq/internal/testenv"
)

func runAudit(t *testing.T) (audit.Report, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--local", "--state-dir", testenv.StateDir(t), "audit"}, &stdout, &stderr)
	var r audit.Report
	if code == 0 || code == exitViolations {
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("audit stdout is not a report: %v\n%s", err, stdout.String())
		}
	}
	return r, stderr.String(), code
}

func has(r audit.Report, invariant string, match func(audit.Violation) bool) bool {
	for _, v := range r.Violations {
		if v.Invariant == invariant && match(v) {
			return true
		}
	}
	return false
}

// Payments made through the HTTP API leave every invariant intact; a paid
// request naming a declined transaction and a ledger charge without its
// transaction, written straight into DynamoDB, are both reported.
func TestAuditThroughTheStack(t *testing.T) {
	m := testenv.NewMerchant(t)
	api := testenv.Stack(t).Info.APIBase
	body := func(token string) string {
		return `{"amount":"4.20","unit":"EUR","name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678",
			"address":"Main St 1","city":"Berlin","state":"BE","postalCode":"10115","country":"DE","token":"` + token + `"}`
	}
	var declinedReq int64
	for _, token := range []string{"tok_success", "tok_success", "tok_declined", "tok_success"} {
		r := testenv.Do(t, "POST", api+"/payments/h2h/44", m.APIKey, body(token))
		if r.Status != 200 {
			t.Fatalf("pay %s: %d %s", token, r.Status, r.Body)
		}
		if token == "tok_declined" {
			declinedReq = int64(r.JSON(t)["paymentRequestId"].(float64))
		}
	}

	rep, stderr, code := runAudit(t)
	if code != 0 || !rep.OK() {
		t.Fatalf("audit after clean payments: exit %d %s\n%+v", code, stderr, rep.Violations)
	}
	if rep.Checked.Transactions < 4 || rep.Checked.Requests < 4 || rep.Checked.LedgerEntries < 4 {
		t.Fatalf("audit did not see the payments: %+v", rep.Checked)
	}

	ctx := context.Background()
	e, err := connect(ctx, globals{local: true, stateDir: testenv.StateDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	txs, err := e.store.TransactionsOfRequest(ctx, declinedReq)
	if err != nil || len(txs) != 1 || txs[0].Status != payment.TxDeclined {
		t.Fatalf("transactions of the declined request: %v %+v", err, txs)
	}
	db := dynamodb.NewFromConfig(e.cfg)
	setStatus := func(st payment.RequestStatus) {
		t.Helper()
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(testenv.Stack(t).Info.Tables["PaymentRequestsTable"]),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(declinedReq, 10)}},
			UpdateExpression:          aws.String("SET #s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.Itoa(int(st))}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setStatus(payment.RequestPaid)
	defer setStatus(payment.RequestUnpaid)
	// A charge booked an hour ago (past the grace period) for no transaction.
	ref := "ptx_" + strconv.FormatInt(time.Now().UnixNano(), 10)
	hourAgo := time.Now().Add(-time.Hour)
	if _, _, err := e.store.PutLedgerEntry(ctx, ledger.Entry{Reference: ref, Kind: ledger.KindCharge, Amount: "4.20", Unit: "EUR",
		Status: provider.Approved, CreatedAt: hourAgo, UpdatedAt: hourAgo}); err != nil {
		t.Fatal(err)
	}
	defer db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(testenv.Stack(t).Info.Tables["OperationsTable"]),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "sbxledger#" + ref}, "sk": &types.AttributeValueMemberS{Value: "entry"}}})

	rep, stderr, code = runAudit(t)
	if code != exitViolations || !strings.Contains(stderr, "violation") {
		t.Fatalf("audit of broken tables: exit %d %s", code, stderr)
	}
	if !has(rep, audit.PaidRequestHasApprovedTx, func(v audit.Violation) bool {
		return v.PaymentRequestID == declinedReq && v.TransactionID == txs[0].ID
	}) {
		t.Errorf("paid request with a declined transaction not reported: %+v", rep.Violations)
	}
	if !has(rep, audit.LedgerChargeHasApprovedTx, func(v audit.Violation) bool { return v.Reference == ref }) {
		t.Errorf("charge without transaction not reported: %+v", rep.Violations)
	}
	if len(rep.Violations) != 2 {
		t.Errorf("want exactly the two planted violations: %+v", rep.Violations)
	}
}

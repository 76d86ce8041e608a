package devstack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/testing/needs"
)

// txCase is one case of the transactional corpus. build makes its setup
// items and its calls with keys from k (prefixed per case, so cases share a
// table); want is what AWS documents for each call, and state the case's
// items afterwards.
type txCase struct {
	name  string
	build func(k func(string) string, table *string) (setup []map[string]dtypes.AttributeValue, calls []*dynamodb.TransactWriteItemsInput)
	want  []string
	state string
}

func sv(v string) dtypes.AttributeValue { return &dtypes.AttributeValueMemberS{Value: v} }
func nv(v string) dtypes.AttributeValue { return &dtypes.AttributeValueMemberN{Value: v} }

func txItem(pk string, n string) map[string]dtypes.AttributeValue {
	return map[string]dtypes.AttributeValue{"pk": sv(pk), "n": nv(n)}
}

func txKey(pk string) map[string]dtypes.AttributeValue {
	return map[string]dtypes.AttributeValue{"pk": sv(pk)}
}

func putNew(table *string, it map[string]dtypes.AttributeValue) dtypes.TransactWriteItem {
	return dtypes.TransactWriteItem{Put: &dtypes.Put{TableName: table, Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
}

func nIs(v string) (*string, map[string]dtypes.AttributeValue) {
	return aws.String("n = :want"), map[string]dtypes.AttributeValue{":want": nv(v)}
}

func incr(table *string, pk string) dtypes.TransactWriteItem {
	return dtypes.TransactWriteItem{Update: &dtypes.Update{TableName: table, Key: txKey(pk),
		UpdateExpression:          aws.String("SET n = if_not_exists(n, :zero) + :one"),
		ExpressionAttributeValues: map[string]dtypes.AttributeValue{":zero": nv("0"), ":one": nv("1")}}}
}

func tx(token string, items ...dtypes.TransactWriteItem) *dynamodb.TransactWriteItemsInput {
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
	if token != "" {
		in.ClientRequestToken = aws.String(token)
	}
	return in
}

// The corpus. Sources (AWS's own documentation, cited in docs/testing.md):
// the TransactWriteItems API reference (up to 100 actions, 4 MB in all, no
// two actions on one item, ClientRequestToken), the TransactionCanceled-
// Exception reference (one CancellationReason per action, None where it
// passed) and the developer guide's "Amazon DynamoDB Transactions: How it
// works" (ConditionCheck checks an item; idempotency).
func transactCorpus() []txCase {
	return []txCase{{
		name: "puts succeed together",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", putNew(t, txItem(k("a"), "1")), putNew(t, txItem(k("b"), "2")))}
		},
		want: []string{"ok"}, state: "a{n=1} b{n=2}",
	}, {
		name: "a failed condition cancels all, reasons per action",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			cond, vals := nIs("2")
			return []map[string]dtypes.AttributeValue{txItem(k("b"), "1")}, []*dynamodb.TransactWriteItemsInput{tx("",
				putNew(t, txItem(k("a"), "1")),
				dtypes.TransactWriteItem{Update: &dtypes.Update{TableName: t, Key: txKey(k("b")), UpdateExpression: aws.String("SET n = :n"),
					ConditionExpression: cond, ExpressionAttributeValues: map[string]dtypes.AttributeValue{":want": vals[":want"], ":n": nv("9")}}},
				putNew(t, txItem(k("c"), "3")))}
		},
		want: []string{"cancelled[None ConditionalCheckFailed None]"}, state: "b{n=1}",
	}, {
		name: "a cancelled transaction puts back the items it updated and deleted",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return []map[string]dtypes.AttributeValue{txItem(k("a"), "1"), txItem(k("c"), "5")}, []*dynamodb.TransactWriteItemsInput{tx("",
				incr(t, k("a")),
				dtypes.TransactWriteItem{Delete: &dtypes.Delete{TableName: t, Key: txKey(k("c"))}},
				dtypes.TransactWriteItem{Put: &dtypes.Put{TableName: t, Item: txItem(k("b"), "1"), ConditionExpression: aws.String("attribute_exists(pk)")}})}
		},
		want: []string{"cancelled[None None ConditionalCheckFailed]"}, state: "a{n=1} c{n=5}",
	}, {
		name: "every condition is evaluated",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return []map[string]dtypes.AttributeValue{txItem(k("a"), "1"), txItem(k("b"), "2")},
				[]*dynamodb.TransactWriteItemsInput{tx("", putNew(t, txItem(k("a"), "7")), incr(t, k("c")), putNew(t, txItem(k("b"), "7")))}
		},
		want: []string{"cancelled[ConditionalCheckFailed None ConditionalCheckFailed]"}, state: "a{n=1} b{n=2}",
	}, {
		name: "a ConditionCheck only checks",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return nil, []*dynamodb.TransactWriteItemsInput{tx("",
				dtypes.TransactWriteItem{ConditionCheck: &dtypes.ConditionCheck{TableName: t, Key: txKey(k("absent")), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				putNew(t, txItem(k("b"), "1")))}
		},
		want: []string{"ok"}, state: "b{n=1}",
	}, {
		name: "a failed ConditionCheck cancels and returns the item when asked",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			cond, vals := nIs("2")
			return []map[string]dtypes.AttributeValue{txItem(k("a"), "1")}, []*dynamodb.TransactWriteItemsInput{tx("",
				dtypes.TransactWriteItem{ConditionCheck: &dtypes.ConditionCheck{TableName: t, Key: txKey(k("a")), ConditionExpression: cond,
					ExpressionAttributeValues: vals, ReturnValuesOnConditionCheckFailure: dtypes.ReturnValuesOnConditionCheckFailureAllOld}},
				putNew(t, txItem(k("b"), "1")))}
		},
		want: []string{"cancelled[ConditionalCheckFailed+item(a{n=1}) None]"}, state: "a{n=1}",
	}, {
		name: "conditional delete and update apply together",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			cond, vals := nIs("1")
			return []map[string]dtypes.AttributeValue{txItem(k("a"), "1"), txItem(k("b"), "5")}, []*dynamodb.TransactWriteItemsInput{tx("",
				dtypes.TransactWriteItem{Delete: &dtypes.Delete{TableName: t, Key: txKey(k("a")), ConditionExpression: cond, ExpressionAttributeValues: vals}},
				incr(t, k("b")))}
		},
		want: []string{"ok"}, state: "b{n=6}",
	}, {
		name: "the same token and request: success, applied once",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			in := tx("tok-"+k("once"), incr(t, k("a")))
			return nil, []*dynamodb.TransactWriteItemsInput{in, in}
		},
		want: []string{"ok", "ok"}, state: "a{n=1}",
	}, {
		name: "a replayed guarded create succeeds",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			in := tx("tok-"+k("create"), putNew(t, txItem(k("a"), "1")), incr(t, k("b")))
			return nil, []*dynamodb.TransactWriteItemsInput{in, in}
		},
		want: []string{"ok", "ok"}, state: "a{n=1} b{n=1}",
	}, {
		name: "the same token with another request: IdempotentParameterMismatch",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			tok := "tok-" + k("mismatch")
			return nil, []*dynamodb.TransactWriteItemsInput{tx(tok, incr(t, k("a"))), tx(tok, incr(t, k("b")))}
		},
		want: []string{"ok", "IdempotentParameterMismatchException"}, state: "a{n=1}",
	}, {
		name: "a token of a cancelled transaction: the retry is evaluated again",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			// Cancelled for a (exists), then the same request: still
			// cancelled, nothing written (no applied request to replay).
			in := tx("tok-"+k("cancelled"), putNew(t, txItem(k("a"), "9")), incr(t, k("b")))
			return []map[string]dtypes.AttributeValue{txItem(k("a"), "1")}, []*dynamodb.TransactWriteItemsInput{in, in}
		},
		want:  []string{"cancelled[ConditionalCheckFailed None]", "cancelled[ConditionalCheckFailed None]"},
		state: "a{n=1}",
	}, {
		name: "100 actions are allowed",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			var items []dtypes.TransactWriteItem
			for i := 0; i < 100; i++ {
				items = append(items, putNew(t, txItem(k(fmt.Sprintf("i%03d", i)), "1")))
			}
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", items...)}
		},
		want: []string{"ok"}, state: "100 items",
	}, {
		name: "101 actions are refused",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			var items []dtypes.TransactWriteItem
			for i := 0; i < 101; i++ {
				items = append(items, putNew(t, txItem(k(fmt.Sprintf("i%03d", i)), "1")))
			}
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", items...)}
		},
		want: []string{"ValidationException"}, state: "",
	}, {
		name: "two actions on one item are refused",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", putNew(t, txItem(k("b"), "1")), putNew(t, txItem(k("a"), "1")), incr(t, k("a")))}
		},
		want: []string{"ValidationException"}, state: "",
	}, {
		name: "an item over 400 KB is refused",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			big := txItem(k("big"), "1")
			big["blob"] = sv(strings.Repeat("x", 410*1024))
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", putNew(t, txItem(k("a"), "1")), putNew(t, big))}
		},
		want: []string{"ValidationException"}, state: "",
	}, {
		name: "a missing table is ResourceNotFound",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", putNew(t, txItem(k("a"), "1")), putNew(aws.String("no-such-table"), txItem(k("b"), "1")))}
		},
		want: []string{"ResourceNotFoundException"}, state: "",
	}, {
		name: "more than 4 MB in all is refused",
		build: func(k func(string) string, t *string) ([]map[string]dtypes.AttributeValue, []*dynamodb.TransactWriteItemsInput) {
			var items []dtypes.TransactWriteItem
			for i := 0; i < 11; i++ { // 11 × 390 KB: each item fits, the whole does not
				it := txItem(k(fmt.Sprintf("p%02d", i)), "1")
				it["blob"] = sv(strings.Repeat("x", 390*1024))
				items = append(items, putNew(t, it))
			}
			return nil, []*dynamodb.TransactWriteItemsInput{tx("", items...)}
		},
		want: []string{"ValidationException"}, state: "",
	}}
}

// TestDynamoDBLocalTransactions runs one corpus of transactions against
// the pinned DynamoDB Local through the AWS SDK for Go v2, and requires of
// each what AWS documents: every call's outcome (success, cancellation
// reasons with any returned item, error code) and the items left. The
// service's transactions rely on each (the returned item of a failed
// condition, a replayed token's success, all or nothing); a DynamoDB Local
// upgrade that departs from AWS fails here, not in a payment test.
func TestDynamoDBLocalTransactions(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	infra := emulatorFiles(t)
	start := time.Now()
	emu, err := StartEmulators(ctx, infra, filepath.Join(t.TempDir(), "logs"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	t.Logf("emulators up in %s", time.Since(start).Round(time.Millisecond))
	db := txClient(ctx, t, emu.DynamoDB)
	table := aws.String("txcorpus")
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	defer func(start time.Time) { t.Logf("corpus run in %s", time.Since(start).Round(time.Millisecond)) }(time.Now())
	for ci, c := range transactCorpus() {
		t.Run(c.name, func(t *testing.T) {
			prefix := fmt.Sprintf("c%02d/", ci)
			k := func(s string) string { return prefix + s }
			setup, calls := c.build(k, table)
			for _, it := range setup {
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: it}); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			var got []string
			for _, in := range calls {
				_, err := db.TransactWriteItems(ctx, in)
				got = append(got, txOutcome(err, prefix))
			}
			if state := txState(ctx, t, db, table, prefix); strings.Join(got, " | ") != strings.Join(c.want, " | ") || state != c.state {
				t.Errorf("outcomes %q, items %q; want %q, items %q", got, state, c.want, c.state)
			}
		})
	}
}

func txClient(ctx context.Context, t *testing.T, endpoint string) *dynamodb.Client {
	t.Helper()
	cfg, err := awsconfig.Load(ctx, func(o *config.LoadOptions) error {
		o.Region = Region
		o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		o.BaseEndpoint = endpoint
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg)
}

// txOutcome names a call's result: ok, cancelled[<reason codes>] (a
// returned item rendered beside its code), or the error code.
func txOutcome(err error, prefix string) string {
	if err == nil {
		return "ok"
	}
	var tc *dtypes.TransactionCanceledException
	if errors.As(err, &tc) {
		var codes []string
		for _, r := range tc.CancellationReasons {
			c := aws.ToString(r.Code)
			if r.Item != nil {
				c += "+item(" + txRender(r.Item, prefix) + ")"
			}
			codes = append(codes, c)
		}
		return "cancelled[" + strings.Join(codes, " ") + "]"
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return err.Error()
}

// txRender renders an item as <pk without prefix>{attr=value,…}; blobs of
// the size cases are left out.
func txRender(it map[string]dtypes.AttributeValue, prefix string) string {
	var attrs []string
	for name, v := range it {
		if name == "pk" || name == "blob" {
			continue
		}
		switch v := v.(type) {
		case *dtypes.AttributeValueMemberN:
			attrs = append(attrs, name+"="+v.Value)
		case *dtypes.AttributeValueMemberS:
			attrs = append(attrs, name+"="+v.Value)
		default:
			attrs = append(attrs, name+"=?")
		}
	}
	sort.Strings(attrs)
	pk, _ := it["pk"].(*dtypes.AttributeValueMemberS)
	name := "?"
	if pk != nil {
		name = strings.TrimPrefix(pk.Value, prefix)
	}
	return name + "{" + strings.Join(attrs, ",") + "}"
}

// txState renders the case's items (those whose pk has its prefix), or
// their count past 10.
func txState(ctx context.Context, t *testing.T, db *dynamodb.Client, table *string, prefix string) string {
	t.Helper()
	var items []string
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: table, ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(pk, :p)"), ExpressionAttributeValues: map[string]dtypes.AttributeValue{":p": sv(prefix)}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			items = append(items, txRender(it, prefix))
		}
	}
	if len(items) > 10 {
		return fmt.Sprintf("%d items", len(items))
	}
	sort.Strings(items)
	return strings.Join(items, " ")
}

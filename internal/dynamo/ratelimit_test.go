package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/testenv"
)

// TestMain stops the shared local stack after the package's tests.
func TestMain(m *testing.M) {
	testenv.Options.Faults = true
	// The full-pass test steps the pass itself (auditpass_test.go).
	testenv.Options.Untriggered = []string{"AuditFunction"}
	testenv.Main(m)
}

// newStore returns a store over the emulator whose AWS calls are counted,
// plus a raw client for inspecting items.
func newStore(t *testing.T) (*dynamo.Store, *testenv.CallCounter, *dynamodb.Client, dynamo.Tables) {
	t.Helper()
	st := testenv.Stack(t)
	cfg, calls := testenv.CountingAWSConfig(t)
	tables := dynamo.Tables{
		Merchants:       st.Resources.Tables["MerchantsTable"],
		PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations:      st.Resources.Tables["OperationsTable"],
	}
	client := dynamodb.NewFromConfig(cfg)
	return dynamo.New(client, tables), calls, client, tables
}

func TestTakeRateLimit(t *testing.T) {
	s, calls, client, tables := newStore(t)
	ctx := context.Background()
	client1 := "mer_rl_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const window = int64(29_000_000)
	exp := time.Unix((window+2)*60, 0)

	calls.Reset()
	for want := 1; want <= 3; want++ {
		n, err := s.TakeRateLimit(ctx, client1, window, 3, exp)
		if err != nil || n != want {
			t.Fatalf("take %d: %d, %v", want, n, err)
		}
	}
	if _, err := s.TakeRateLimit(ctx, client1, window, 3, exp); !errkind.Is(err, errkind.RateLimited) {
		t.Fatalf("4th take: %v, want RateLimited", err)
	}
	if got := len(calls.Calls()); got != 4 {
		t.Errorf("%d AWS calls for 4 takes, want 4: %v", got, calls.Calls())
	}
	// A refused take counts nothing; a raised limit admits again.
	if n, err := s.TakeRateLimit(ctx, client1, window, 5, exp); err != nil || n != 4 {
		t.Fatalf("take with a raised limit: %d, %v", n, err)
	}
	// Other windows and other clients have their own counters.
	if n, err := s.TakeRateLimit(ctx, client1, window+1, 3, exp); err != nil || n != 1 {
		t.Fatalf("next window: %d, %v", n, err)
	}
	if n, err := s.TakeRateLimit(ctx, client1+"x", window, 3, exp); err != nil || n != 1 {
		t.Fatalf("other client: %d, %v", n, err)
	}
	if _, err := s.TakeRateLimit(ctx, client1, window+5, 0, exp); !errkind.Is(err, errkind.RateLimited) {
		t.Fatalf("limit 0: %v", err)
	}

	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tables.Operations), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "rl#" + client1},
		"sk": &types.AttributeValueMemberS{Value: strconv.FormatInt(window, 10)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN); !ok || e.Value != strconv.FormatInt(exp.Unix(), 10) {
		t.Errorf("expiresAt = %#v, want the number %d (TTL attribute)", out.Item["expiresAt"], exp.Unix())
	}
	if c, ok := out.Item["count"].(*types.AttributeValueMemberN); !ok || c.Value != "4" {
		t.Errorf("count = %#v, want 4", out.Item["count"])
	}
}

func TestTakeRateLimitConcurrent(t *testing.T) {
	s, _, _, _ := newStore(t)
	client1 := "mer_rlc_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const n, limit = 40, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int]bool{}
	refused := 0
	for range n {
		wg.Go(func() {
			c, err := s.TakeRateLimit(context.Background(), client1, 7, limit, time.Now().Add(time.Hour))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errkind.Is(err, errkind.RateLimited):
				refused++
			case err != nil:
				t.Error(err)
			case seen[c]:
				t.Errorf("count %d returned twice", c)
			default:
				seen[c] = true
			}
		})
	}
	wg.Wait()
	if len(seen) != limit || refused != n-limit {
		t.Fatalf("admitted %d, refused %d; want %d and %d", len(seen), refused, limit, n-limit)
	}
}

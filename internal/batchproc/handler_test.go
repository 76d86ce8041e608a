package batchproc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// The Lambda entry point of functions/batch takes both triggers as raw JSON,
// exactly as Lambda delivers them.
func TestLambdaEntryPointDispatchesBothTriggers(t *testing.T) {
	f := newFixture(t)
	p, _, _ := f.processor(t, nil)
	h := lambda.NewHandler(p.Handle)
	ctx := context.Background()
	m := testenv.NewMerchant(t)
	content, want := mixedFile(randomHex(4))

	raw, _ := json.Marshal(f.upload(t, m.ID, "raw.csv", []byte(content)))
	if _, err := h.Invoke(ctx, raw); err != nil {
		t.Fatal(err)
	}
	checkMixed(t, parseResult(t, f.result(t, m.ID, "raw.csv")), want)

	jobs := f.jobs(t, m.ID, "raw.csv")
	body, _ := json.Marshal(batchproc.Continuation{MerchantID: m.ID, JobID: jobs[0].JobID})
	raw, _ = json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(body), EventSource: "aws:sqs"}}})
	out, err := h.Invoke(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("continuation of a finished job: %s %v", out, err)
	}
	if _, err := h.Invoke(ctx, []byte(`{"Records":[{"eventSource":"aws:dynamodb"}]}`)); err == nil {
		t.Error("an event of another source was accepted")
	}
}

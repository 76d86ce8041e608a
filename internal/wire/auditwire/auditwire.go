// Package auditwire builds AuditFunction, the invariant audit: the
// consumer of the audited tables' streams (each change queues a check of
// what it touches), the scheduled run (due checks, the checkpointed full
// pass, the stream heartbeat, the metrics) and the archive of what TTL
// removes from the payment tables. It reads no seal key and calls no
// provider.
package auditwire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/wire"
)

// Lambda is AuditFunction's handler: its event sources hand it a DynamoDB
// stream batch (answered with the records to retry) and its schedule an
// EventBridge event (answered with null).
type Lambda = func(context.Context, json.RawMessage) (*events.DynamoDBEventResponse, error)

// Auditor is the audit function.
type Auditor struct {
	Store    *dynamo.AuditStore
	Consumer *audit.Consumer
	Runner   *audit.Runner
	Archive  *s3store.Store
	Log      *slog.Logger
	// Metrics receives the scheduled run's metric line (stdout on Lambda).
	Metrics func(audit.RunMetrics) error
	// Now is the audit's clock (time.Now; tests move it).
	Now func() time.Time
}

// AuditLambda is AuditFunction's Lambda handler.
func AuditLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (Lambda, error) {
	a, err := New(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return a.Handle, nil
}

// New wires the audit function.
func New(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ *Auditor, err error) {
	defer wire.Annotate(&err, "audit")
	b, err := wire.Load(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	if b.Cfg.Tables.Transactions == "" || getenv("ARCHIVE_BUCKET") == "" {
		return nil, fmt.Errorf("TRANSACTIONS_TABLE and ARCHIVE_BUCKET are required")
	}
	grace, err := durationOr(getenv, "AUDIT_GRACE", audit.DefaultGrace)
	if err != nil {
		return nil, err
	}
	budget, err := durationOr(getenv, "AUDIT_BUDGET", 40*time.Second)
	if err != nil {
		return nil, err
	}
	every, err := durationOr(getenv, "AUDIT_PASS_EVERY", 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	segments, err := strconv.Atoi(getenv("AUDIT_PASS_SEGMENTS"))
	if err != nil || segments < 1 || segments > 1000 {
		return nil, fmt.Errorf("AUDIT_PASS_SEGMENTS: %q is not 1..1000", getenv("AUDIT_PASS_SEGMENTS"))
	}
	st := b.Store.Audit()
	judge := st.Judge(grace, b.Cfg.Sandbox())
	log := b.Logger("audit")
	return &Auditor{
		Store:    st,
		Consumer: &audit.Consumer{Checks: st, Heartbeat: st, Grace: grace},
		Runner: &audit.Runner{Judge: judge, Checks: st, Findings: st, Heartbeat: st, Log: log, Budget: budget, DueBatch: 200, Concurrency: 16,
			Pass: &audit.Passer{Store: st, Judge: judge, Tables: audit.PassTables(b.Cfg.Sandbox()), Segments: segments, Every: every,
				PageSize: 500, Workers: 4, JudgeConcurrency: 4}},
		Archive: s3store.New(s3store.NewClient(b.AWS), getenv("ARCHIVE_BUCKET")),
		Log:     log,
		Metrics: func(m audit.RunMetrics) error { return m.Publish(os.Stdout) },
		Now:     time.Now,
	}, nil
}

func durationOr(getenv config.Getenv, name string, def time.Duration) (time.Duration, error) {
	d, err := wire.Duration(getenv, name)
	if err != nil || d == 0 {
		return def, err
	}
	return d, nil
}

// Handle dispatches an event: a stream batch has Records, a schedule not.
func (a *Auditor) Handle(ctx context.Context, raw json.RawMessage) (*events.DynamoDBEventResponse, error) {
	var probe struct {
		Records []json.RawMessage `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("audit: event: %w", err)
	}
	if probe.Records == nil {
		_, err := a.Scheduled(ctx)
		return nil, err
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("audit: stream event: %w", err)
	}
	resp, err := a.Stream(ctx, ev)
	return &resp, err
}

// Scheduled is the every-minute run.
func (a *Auditor) Scheduled(ctx context.Context) (audit.RunStats, error) {
	if d, ok := ctx.Deadline(); ok {
		// Leave the run time to publish its metrics before the timeout.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	return a.Runner.Run(ctx, a.Now(), a.Metrics)
}

// ttlRemoval reports whether a stream record is DynamoDB's own TTL deletion.
func ttlRemoval(r events.DynamoDBEventRecord) bool {
	return r.EventName == "REMOVE" && r.UserIdentity != nil && r.UserIdentity.Type == "Service" &&
		r.UserIdentity.PrincipalID == "dynamodb.amazonaws.com"
}

// Stream takes one stream batch: the checks its changes ask for, the
// heartbeat marked seen, and the payment records TTL removed archived. A
// record that cannot be read is reported failed, with every record after
// it (the event source mapping retries from it, then sends the batch to
// the audit's DLQ); the ones before it are taken. A failed write fails the
// whole batch: every write here is safe to repeat.
func (a *Auditor) Stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var (
		resp       events.DynamoDBEventResponse
		changes    []audit.Change
		heartbeats []time.Time
		archive    = map[string][]events.DynamoDBEventRecord{} // by table kind
	)
	for _, r := range ev.Records {
		table := streamTable(r.EventSourceArn)
		kind := a.Store.TableKind(table)
		if ttlRemoval(r) && (kind == "transactions" || kind == "requests") {
			archive[kind] = append(archive[kind], r)
			continue
		}
		old, err := image(r.Change.OldImage)
		var img map[string]types.AttributeValue
		if err == nil {
			img, err = image(r.Change.NewImage)
		}
		var sc dynamo.StreamChange
		if err == nil {
			sc, err = a.Store.StreamChange(table, old, img, r.Change.ApproximateCreationDateTime.Time)
		}
		if err != nil {
			a.Log.Error("audit: stream record not readable", "eventId", r.EventID, "table", table, "sequence", r.Change.SequenceNumber, "error", err.Error())
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
			break
		}
		changes = append(changes, sc.Change)
		if !sc.Heartbeat.IsZero() {
			heartbeats = append(heartbeats, sc.Heartbeat)
		}
	}
	if err := a.Consumer.Consume(ctx, changes, heartbeats); err != nil {
		return events.DynamoDBEventResponse{}, err
	}
	for kind, recs := range archive {
		if err := a.archive(ctx, kind, recs); err != nil {
			return events.DynamoDBEventResponse{}, err
		}
	}
	return resp, nil
}

// archive writes the removed records of one table as one JSON-lines
// object, named after the removal day and the records' sequence numbers:
// a retried batch writes the same object again.
func (a *Auditor) archive(ctx context.Context, kind string, recs []events.DynamoDBEventRecord) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		line := map[string]any{"table": kind, "eventId": r.EventID, "removedAt": r.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339),
			"keys": r.Change.Keys, "item": r.Change.OldImage}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("audit: archive record: %w", err)
		}
	}
	at := recs[0].Change.ApproximateCreationDateTime.UTC()
	key := fmt.Sprintf("%s/%s/%s-%s.jsonl", kind, at.Format("2006/01/02"), recs[0].Change.SequenceNumber, recs[len(recs)-1].Change.SequenceNumber)
	if _, err := a.Archive.PutBytes(ctx, key, buf.Bytes()); err != nil {
		return fmt.Errorf("audit: archive %s: %w", key, err)
	}
	a.Log.Info("audit: archived expired records", "table", kind, "records", len(recs), "key", key)
	return nil
}

// streamTable is the table name of a stream ARN
// (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>).
func streamTable(arn string) string {
	_, rest, _ := strings.Cut(arn, ":table/")
	name, _, _ := strings.Cut(rest, "/stream/")
	return name
}

// image converts a stream image (Lambda's event type) to the SDK's.
func image(m map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		av, err := value(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func value(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, x := range v.List() {
			av, err := value(x)
			if err != nil {
				return nil, err
			}
			l = append(l, av)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := image(v.Map())
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]types.AttributeValue{}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unknown attribute type %v", v.DataType())
}

package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/sandboxledger"
)

var _ audit.Source = (*Store)(nil)

// AuditData reads everything the invariant audit judges with strongly
// consistent full scans, in the payment path's write order backwards
// (transactions, then payment requests, then the operations table's ledger
// entries, delivery attempts and batch jobs in one pass), so that a state
// seen in an earlier scan implies the writes that precede it (see package
// audit). The cost is one read of each table, page by page.
func (s *Store) AuditData(ctx context.Context) (audit.Data, error) {
	d := audit.Data{LedgerRetention: ledgerRetention, DeliveryRetention: DeliveryRetention}
	err := s.consistentScan(ctx, s.t.Transactions, "", nil, func(item map[string]types.AttributeValue) error {
		t, err := unmarshalTransaction(item)
		if err != nil {
			return err
		}
		at := audit.Transaction{ID: t.ID, PaymentRequestID: t.PaymentRequestID, Status: t.Status, Reference: t.Reference,
			RecoverAfter: t.RecoverAfter, RefundProcessing: t.Refund != nil && t.Refund.Status == payment.RefundProcessing,
			CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
		if ev, ok := item["notifyEvent"].(*types.AttributeValueMemberM); ok {
			if id, ok := ev.Value["eventId"].(*types.AttributeValueMemberS); ok {
				at.OutboxEventID = id.Value
			}
		}
		d.Transactions = append(d.Transactions, at)
		return nil
	})
	if err != nil {
		return d, err
	}
	err = s.consistentScan(ctx, s.t.PaymentRequests, "", nil, func(item map[string]types.AttributeValue) error {
		r, err := unmarshalRequest(item)
		if err != nil {
			return err
		}
		d.Requests = append(d.Requests, audit.Request{ID: r.ID, Status: r.Status, TransactionID: r.TransactionID, UpdatedAt: r.UpdatedAt})
		return nil
	})
	if err != nil {
		return d, err
	}
	now := time.Now()
	err = s.consistentScan(ctx, s.t.Operations, "begins_with(pk, :l) OR begins_with(pk, :d) OR begins_with(pk, :b)",
		map[string]types.AttributeValue{":l": strAV(ledgerPrefix), ":d": strAV(deliveryPrefix), ":b": strAV(batchJobPrefix)},
		func(item map[string]types.AttributeValue) error {
			pk, _ := item["pk"].(*types.AttributeValueMemberS)
			if pk == nil {
				return nil
			}
			switch {
			case strings.HasPrefix(pk.Value, ledgerPrefix):
				e, err := unmarshalLedger(item)
				if err != nil {
					return err
				}
				d.Ledger = append(d.Ledger, audit.LedgerEntry{Reference: e.Reference, Charge: e.Kind == sandboxledger.KindCharge,
					Approved: e.Status == provider.Approved, Voided: e.Voided, Abandoned: e.Abandoned, UpdatedAt: e.UpdatedAt})
			case strings.HasPrefix(pk.Value, deliveryPrefix):
				if exp, ok := item["expiresAt"].(*types.AttributeValueMemberN); ok {
					if n, _ := strconv.ParseInt(exp.Value, 10, 64); n < now.Unix() {
						return nil // expired: TTL deletion is lazy
					}
				}
				var a struct {
					RequestID int64  `dynamodbav:"requestId"`
					EventID   string `dynamodbav:"eventId"`
				}
				if err := attributevalue.UnmarshalMap(item, &a); err != nil {
					return fmt.Errorf("unmarshal delivery attempt: %w", err)
				}
				d.Deliveries = append(d.Deliveries, audit.Delivery{RequestID: a.RequestID, EventID: a.EventID})
			default:
				j, err := unmarshalBatchJob(item)
				if err != nil {
					return err
				}
				aj := audit.BatchJob{MerchantID: j.MerchantID, JobID: j.JobID, State: j.State, Finished: j.Finished(), UpdatedAt: j.UpdatedAt}
				if j.LeaseUntil != 0 {
					aj.LeaseUntil = time.UnixMilli(j.LeaseUntil).UTC()
				}
				d.BatchJobs = append(d.BatchJobs, aj)
			}
			return nil
		})
	return d, err
}

// deliveryPrefix is the partition key prefix of delivery attempts (RecordDelivery).
const deliveryPrefix = "dlv#"

// consistentScan visits every item of table matching filter (empty: all),
// page by page, with strongly consistent reads: the audit's ordering
// argument needs every scan to see all writes made before it.
func (s *Store) consistentScan(ctx context.Context, table, filter string, vals map[string]types.AttributeValue, visit func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	if filter != "" {
		in.FilterExpression, in.ExpressionAttributeValues = aws.String(filter), vals
	}
	for {
		out, err := s.db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range out.Items {
			if err := visit(it); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

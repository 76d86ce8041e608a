package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/payment"
)

// number is a decimal stored as a DynamoDB number: exact up to 38 digits.
type number decimal.Decimal

func (n number) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return &types.AttributeValueMemberN{Value: decimal.Decimal(n).String()}, nil
}

func (n *number) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return fmt.Errorf("amount is %T, want a number", av)
	}
	d, err := decimal.NewFromString(v.Value)
	if err != nil {
		return err
	}
	*n = number(d)
	return nil
}

func numberAV(i int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
}

type lastLogRecord struct {
	TransactionStatus int    `dynamodbav:"transactionStatusId"`
	Message           string `dynamodbav:"message"`
	Code              string `dynamodbav:"code"`
}

type requestRecord struct {
	ID                int64           `dynamodbav:"id"`
	MerchantID        string          `dynamodbav:"merchantId"`
	RecipientName     string          `dynamodbav:"recipientName,omitempty"`
	Status            int             `dynamodbav:"status"`
	Amount            number          `dynamodbav:"amount"`
	Unit              string          `dynamodbav:"unit"`
	ReferenceID       string          `dynamodbav:"referenceId,omitempty"`
	Notes             string          `dynamodbav:"notes,omitempty"`
	Client            *payment.Client `dynamodbav:"client,omitempty"`
	NotifyURL         string          `dynamodbav:"notifyUrl,omitempty"`
	SuccessURL        string          `dynamodbav:"successUrl,omitempty"`
	FailureURL        string          `dynamodbav:"failureUrl,omitempty"`
	TransactionID     int64           `dynamodbav:"transactionId,omitempty"`
	TransactionNumber string          `dynamodbav:"transactionNumber,omitempty"`
	TransactionStatus *int            `dynamodbav:"transactionStatusId,omitempty"`
	LastLog           *lastLogRecord  `dynamodbav:"lastLog,omitempty"`
	CreatedAt         time.Time       `dynamodbav:"createdAt"`
	UpdatedAt         time.Time       `dynamodbav:"updatedAt"`
	Version           int64           `dynamodbav:"version"`
	// ExpiresAt (TTL): requestExpiresAt.
	ExpiresAt int64 `dynamodbav:"expiresAt,omitempty"`
}

func toRequestRecord(r *payment.Request) requestRecord {
	rec := requestRecord{
		ID: r.ID, MerchantID: r.MerchantID, RecipientName: r.RecipientName, Status: int(r.Status),
		Amount: number(r.Amount), Unit: r.Unit, ReferenceID: r.ReferenceID, Notes: r.Notes, Client: r.Client,
		NotifyURL: r.NotifyURL, SuccessURL: r.SuccessURL, FailureURL: r.FailureURL,
		TransactionID: r.TransactionID, TransactionNumber: r.TransactionNumber,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Version: r.Version,
	}
	if !r.CreatedAt.IsZero() {
		var paidAt time.Time
		if r.Status == payment.RequestPaid {
			paidAt = r.UpdatedAt // the payment's commit sets both
		}
		rec.ExpiresAt = requestExpiresAt(r.CreatedAt, paidAt)
	}
	if r.TransactionStatus != nil {
		s := int(*r.TransactionStatus)
		rec.TransactionStatus = &s
	}
	if r.LastLog != nil {
		rec.LastLog = &lastLogRecord{int(r.LastLog.TransactionStatusID), r.LastLog.Message, string(r.LastLog.Code)}
	}
	return rec
}

func (rec requestRecord) request() *payment.Request {
	r := &payment.Request{
		ID: rec.ID, MerchantID: rec.MerchantID, RecipientName: rec.RecipientName, Status: payment.RequestStatus(rec.Status),
		Amount: decimal.Decimal(rec.Amount), Unit: rec.Unit, ReferenceID: rec.ReferenceID, Notes: rec.Notes, Client: rec.Client,
		NotifyURL: rec.NotifyURL, SuccessURL: rec.SuccessURL, FailureURL: rec.FailureURL,
		TransactionID: rec.TransactionID, TransactionNumber: rec.TransactionNumber,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Version: rec.Version,
	}
	if rec.TransactionStatus != nil {
		s := payment.TransactionStatus(*rec.TransactionStatus)
		r.TransactionStatus = &s
	}
	if rec.LastLog != nil {
		r.LastLog = &payment.LastLog{
			TransactionStatusID: payment.TransactionStatus(rec.LastLog.TransactionStatus),
			Message:             rec.LastLog.Message, Code: codes.Code(rec.LastLog.Code),
		}
	}
	return r
}

// CreatePaymentRequest stores a new request; Exists when the id is taken
// (an id collision: the caller draws a new id).
func (s *Store) CreatePaymentRequest(ctx context.Context, r *payment.Request) error {
	r.Version = 1
	item, err := attributevalue.MarshalMap(toRequestRecord(r))
	if err != nil {
		return fmt.Errorf("marshal payment request %d: %w", r.ID, err)
	}
	return s.putIfAbsent(ctx, s.t.PaymentRequests, "id", item, fmt.Sprintf("payment request %d", r.ID))
}

// PaymentRequest loads a request by id (strongly consistent: a client that
// just created it must see it).
func (s *Store) PaymentRequest(ctx context.Context, id int64) (*payment.Request, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.t.PaymentRequests,
		Key:            map[string]types.AttributeValue{"id": numberAV(id)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get payment request %d: %w", id, err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var rec requestRecord
	if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal payment request %d: %w", id, err)
	}
	return rec.request(), nil
}

// CancelPaymentRequest moves an unpaid request of merchantID to cancelled in
// one conditional write. It returns notFound() when the request does not
// exist or belongs to another merchant, and Conflict (with the current
// request) when it is no longer unpaid.
func (s *Store) CancelPaymentRequest(ctx context.Context, id int64, merchantID string, now time.Time) (*payment.Request, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.PaymentRequests,
		Key:                      map[string]types.AttributeValue{"id": numberAV(id)},
		UpdateExpression:         aws.String("SET #status = :cancelled, updatedAt = :now, version = version + :one"),
		ConditionExpression:      aws.String("merchantId = :m AND #status = :unpaid"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":cancelled": numberAV(int64(payment.RequestCancelled)), ":unpaid": numberAV(int64(payment.RequestUnpaid)),
			":m": &types.AttributeValueMemberS{Value: merchantID}, ":one": numberAV(1),
			":now": &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		cur, gerr := s.PaymentRequest(ctx, id)
		if gerr != nil {
			return nil, gerr
		}
		if cur.MerchantID != merchantID {
			return nil, notFound()
		}
		return cur, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel payment request %d: %w", id, err)
	}
	var rec requestRecord
	if err := attributevalue.UnmarshalMap(out.Attributes, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal payment request %d: %w", id, err)
	}
	return rec.request(), nil
}

// RecordCancelledAttempt shows the final state of attempt txID on a request
// that was cancelled while the attempt was pending: transactionStatusId and
// lastLog follow the transaction (declined 012), so the status endpoint
// never shows a pending attempt on a cancelled request. Guarded by
// "cancelled AND transactionId = txID"; Conflict otherwise.
func (s *Store) RecordCancelledAttempt(ctx context.Context, requestID, txID int64, st payment.TransactionStatus, code codes.Code, message string, now time.Time) error {
	ll, err := attributevalue.Marshal(lastLogRecord{TransactionStatus: int(st), Message: message, Code: string(code)})
	if err != nil {
		return fmt.Errorf("marshal lastLog: %w", err)
	}
	u := (&update{}).set("transactionStatusId", numberAV(int64(st))).set("lastLog", ll).set("updatedAt", timeAV(now)).
		remove("attemptTx", "leaseUntil")
	in := u.input(s.t.PaymentRequests, map[string]types.AttributeValue{"id": numberAV(requestID)})
	in.ConditionExpression = aws.String("#status = :cancelled AND transactionId = :tx")
	in.ExpressionAttributeNames["#status"] = "status"
	in.ExpressionAttributeValues[":cancelled"] = numberAV(int64(payment.RequestCancelled))
	in.ExpressionAttributeValues[":tx"] = numberAV(txID)
	if _, err := s.db.UpdateItem(ctx, in); isConditionFailed(err) {
		return conflict(err)
	} else if err != nil {
		return fmt.Errorf("record cancelled attempt on payment request %d: %w", requestID, err)
	}
	return nil
}

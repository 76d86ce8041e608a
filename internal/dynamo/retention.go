package dynamo

import "time"

// RecordRetention is how long payment requests and transactions stay in
// their tables (TTL attribute expiresAt; docs/operations.md, Retention):
// the card schemes' longest dispute window (540 days) with a margin. A
// transaction expires RecordRetention after its creation, a request after
// its creation or, once paid, after its payment: never before the
// transactions it names. Expired items leave by TTL, and the audit
// function archives each one to S3 as DynamoDB's TTL removes it.
const RecordRetention = 730 * 24 * time.Hour

// transactionExpiresAt is a transaction's expiresAt (TTL, Unix seconds):
// RecordRetention after its creation.
func transactionExpiresAt(createdAt time.Time) int64 {
	return createdAt.Add(RecordRetention).Unix()
}

// requestExpiresAt is a payment request's expiresAt (TTL, Unix seconds):
// RecordRetention after its creation or, once paid (paidAt not zero),
// after its payment, so it never leaves before the transactions it names.
func requestExpiresAt(createdAt, paidAt time.Time) int64 {
	if !paidAt.IsZero() {
		return paidAt.Add(RecordRetention).Unix()
	}
	return createdAt.Add(RecordRetention).Unix()
}

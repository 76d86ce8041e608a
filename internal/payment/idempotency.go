package payment

import "time"

// Idempotency record states.
const (
	IdempotencyInProgress = "in_progress"
	IdempotencyCompleted  = "completed"
)

// IdempotencyRecord is one merchant's use of one Idempotency-Key (kept by
// the idempotency guard, internal/idempotency, in the store). It holds a
// fingerprint of the request, never the request itself (bodies may carry
// card data), and once completed the response to replay.
type IdempotencyRecord struct {
	MerchantID  string
	Key         string
	Fingerprint string // keyed HMAC of method, path and the canonical body without card data
	// Nonce is drawn when the key is first claimed and kept when a retry
	// takes over a claim a crash left behind: the ids of what the request
	// creates are derived from it, which binds the key to its resources
	// before any money moves.
	Nonce string
	State string // IdempotencyInProgress or IdempotencyCompleted
	// Token identifies the claim: only its holder may complete or release it,
	// so a holder whose lease ran out cannot overwrite its successor.
	Token      string
	LeaseUntil time.Time // in progress: others may take the key over after it
	ExpiresAt  time.Time // the record counts as absent from then on
	CreatedAt  time.Time

	// The stored response (completed records).
	Status  int
	Headers map[string]string
	Body    []byte
}

// Expired reports whether the record no longer exists logically (DynamoDB
// TTL deletes lazily, up to days late; DynamoDB Local never).
func (r *IdempotencyRecord) Expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

// LeaseExpired reports whether an in-progress claim may be taken over.
func (r *IdempotencyRecord) LeaseExpired(now time.Time) bool {
	return r.State == IdempotencyInProgress && !now.Before(r.LeaseUntil)
}

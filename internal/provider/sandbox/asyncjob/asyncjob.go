// Package asyncjob is the message between the payment core and the
// sandbox function (internal/provider/sandbox/worker): the payment core queues a Job
// for a sandbox result due later, the worker delivers it as a signed
// callback. Jobs carry ids and outcomes only, never card data.
package asyncjob

import (
	"strconv"
	"time"
)

// Job kinds.
const (
	// KindResult reports a final payment result to POST /callbacks/svc.
	KindResult = "provider_result"
	// KindThreeDSTimeout ends an unanswered 3-D Secure challenge through
	// POST /callbacks/3ds (declined, 013).
	KindThreeDSTimeout = "threeds_timeout"
	// KindThreeDSAnswer carries the payer's answer on the sandbox 3-D Secure
	// page to POST /callbacks/3ds (Result approve or fail), when the hosted
	// checkout has no configured public base URL to post it to itself.
	KindThreeDSAnswer = "threeds_answer"
)

// Job is one queued sandbox result.
type Job struct {
	Kind             string    `json:"kind"`
	EventID          string    `json:"eventId"`
	TransactionID    int64     `json:"transactionId"`
	PaymentRequestID int64     `json:"paymentRequestId"`
	Status           int       `json:"status,omitempty"` // 1 approved, 2 declined (KindResult)
	Code             string    `json:"code,omitempty"`
	ProviderRef      string    `json:"providerRef,omitempty"`
	Result           string    `json:"result,omitempty"` // approve | fail (KindThreeDSAnswer)
	DueAt            time.Time `json:"dueAt"`
}

// EventIDFor is the provider event id of a job: stable, so a redelivered
// message is recognised as a duplicate by the callback receiver.
func EventIDFor(kind string, txID int64) string {
	return "sbx_" + kind + "_" + strconv.FormatInt(txID, 10)
}

package payment

import "time"

// A merchant's notifications as the notifier records them: each delivery
// attempt, the outbox entries the reconciler re-sends, and the events whose
// notification is not delivered (the dashboard's overview).

// DeliveryAttempt is one recorded notification attempt.
type DeliveryAttempt struct {
	RequestID  int64     `json:"requestId" dynamodbav:"requestId"`
	EventID    string    `json:"eventId" dynamodbav:"eventId"`
	Attempt    int       `json:"attempt" dynamodbav:"attempt"`
	At         time.Time `json:"at" dynamodbav:"at"`
	URL        string    `json:"url" dynamodbav:"url"`
	StatusCode int       `json:"statusCode,omitempty" dynamodbav:"statusCode,omitempty"`
	LatencyMS  int64     `json:"latencyMs" dynamodbav:"latencyMs"`
	Error      string    `json:"error,omitempty" dynamodbav:"error,omitempty"`
	Outcome    string    `json:"outcome" dynamodbav:"outcome"` // delivered | retry | dead-lettered | skipped
	NextAt     time.Time `json:"nextAttemptAt,omitzero" dynamodbav:"nextAt,omitempty"`
}

// DeliveryWrite is a delivery attempt to record; ClearOutboxOf, when not
// 0, is the transaction whose outbox entry (of the attempt's event) the
// same write clears: a first attempt's.
type DeliveryWrite struct {
	Attempt       DeliveryAttempt
	ClearOutboxOf int64
}

// OutboxEntry is a due notification found by the reconciler.
type OutboxEntry struct {
	Event NotifyEvent
	DueAt string // the exact stored value, for the conditional lease
}

// NotificationProblem is an event whose notification is not delivered.
type NotificationProblem struct {
	EventID   string    `dynamodbav:"sk"`
	State     string    `dynamodbav:"state"` // "failing" (retries scheduled) or "dlq"
	RequestID int64     `dynamodbav:"requestId"`
	At        time.Time `dynamodbav:"at"`
}

// Notification problem states.
const (
	NotifyFailing = "failing"
	NotifyDLQ     = "dlq"
)

// The outbox's index is sharded to spread its partitions; each channel has
// its own OutboxShards shards, so the reconciler reads the entries of one
// channel without paging past the other's: a batch's thousands of in-flight
// entries never hide an interactive payment's lost one.
const (
	OutboxShards = 8
	// OutboxAllShards counts the shards of every channel.
	OutboxAllShards = 2 * OutboxShards
)

// OutboxShard is the first shard of channel c; its shards are
// OutboxShard(c) … OutboxShard(c)+OutboxShards-1.
func OutboxShard(c Channel) int {
	if c.Batch() {
		return OutboxShards
	}
	return 0
}

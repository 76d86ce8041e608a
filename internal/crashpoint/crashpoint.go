// Package crashpoint names the places on the money paths where a fault
// injection test kills the process. Hit is a no-op in every normal build;
// only a binary built with the `crashtest` build tag can die there (see
// crash_on.go), so the Lambda binaries, built without it, cannot reach the
// kill at all.
//
// A test builds the local stack with `-tags crashtest`, starts it with
// PAYREQ_CRASH_AT=<name>[@<n>] (die at the n-th hit, default 1), and the
// process sends itself SIGKILL at that line: no deferred function, flush or
// graceful shutdown runs, as when Lambda's sandbox is torn down.
package crashpoint

// Names of the crash points. Each is one line of a money path; the fault
// injection tests have one test per name.
const (
	AfterLease           = "after-lease"            // attempt lease taken on the payment request
	AfterTxWrite         = "after-tx-write"         // write-ahead transaction record stored (waiting)
	AfterCharge          = "after-charge"           // provider answered, nothing recorded yet
	AfterFailover        = "after-failover"         // transaction moved to the next connector, not charged there yet
	AfterTechnicalCancel = "after-technical-cancel" // a charge without answer cancelled at the acquirer by its reference, not declined yet
	AfterRequestCommit   = "after-request-commit"   // payment request committed (paid / pending)
	AfterTxSettle        = "after-tx-settle"        // transaction settled (final status stored)
	AfterOutboxWrite     = "after-outbox-write"     // notification outbox entry stored
	AfterQueueSend       = "after-queue-send"       // notification message sent to SQS
	InCallback           = "in-callback"            // provider callback accepted, not yet applied
	AfterIdemBind        = "after-idempotency-bind" // Idempotency-Key bound to its resource
	BatchAfterSnapshot   = "batch-after-snapshot"   // batch: work snapshot written
	BatchAfterRowCharge  = "batch-after-row-charge" // batch: a row charged, not checkpointed
	BatchAfterPart       = "batch-after-part"       // batch: a result part written
	BatchBeforeDone      = "batch-before-done"      // batch: result assembled, job not closed
	InRefundEvent        = "in-refund-event"        // a refund's final status stored, its notification not queued
	InLateVoid           = "in-late-void"           // a late charge recorded (voiding), the void not asked yet
)

// EnvVar selects the crash point in a crashtest build.
const EnvVar = "PAYREQ_CRASH_AT"

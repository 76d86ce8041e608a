package batch

import "time"

// The processing state of uploaded files, as the batch function keeps it
// (stored by internal/dynamo). None of it holds card data: offsets, line
// numbers, counts, object keys and payment request ids.

// Job states.
const (
	JobHashing    = "hashing"    // computing the content hash (resumable)
	JobCharging   = "charging"   // reading rows from Offset
	JobAssembling = "assembling" // joining result parts into the result file
	// JobReporting: the job was abandoned (see Error); its remaining lines
	// are reported from their row records, and nothing more is charged.
	JobReporting = "reporting"
	JobDone      = "done"
	JobFailed    = "failed" // nothing more will happen (see Error)
)

// Counts are a job's rows by outcome.
type Counts struct {
	Rows     int64 `dynamodbav:"rows" json:"rows"`
	Approved int64 `dynamodbav:"approved" json:"approved"`
	Declined int64 `dynamodbav:"declined" json:"declined"`
	Pending  int64 `dynamodbav:"pending" json:"pending"`
	Rejected int64 `dynamodbav:"rejected" json:"rejected"`
	// Duplicate rows were charged before by another line or file.
	Duplicate int64 `dynamodbav:"duplicate" json:"duplicate"`
}

// Add sums two counts.
func (c Counts) Add(o Counts) Counts {
	return Counts{Rows: c.Rows + o.Rows, Approved: c.Approved + o.Approved, Declined: c.Declined + o.Declined,
		Pending: c.Pending + o.Pending, Rejected: c.Rejected + o.Rejected, Duplicate: c.Duplicate + o.Duplicate}
}

// Job is the processing state and summary of one uploaded file. It never
// holds card data: only byte offsets, line numbers, counts and object keys.
type Job struct {
	MerchantID string `dynamodbav:"-"`
	JobID      string `dynamodbav:"-"`

	File      string `dynamodbav:"file"`      // name as uploaded
	Bucket    string `dynamodbav:"bucket"`    // batch bucket
	Key       string `dynamodbav:"key"`       // incoming/<merchantId>/<file>
	ETag      string `dynamodbav:"etag"`      // of the uploaded object
	Size      int64  `dynamodbav:"size"`      // bytes
	Sequencer string `dynamodbav:"sequencer"` // of the S3 event
	Snapshot  string `dynamodbav:"snapshot,omitempty"`
	ResultKey string `dynamodbav:"resultKey"`

	State      string `dynamodbav:"state"`
	HashOffset int64  `dynamodbav:"hashOffset"`
	HashState  []byte `dynamodbav:"hashState,omitempty"` // sha256 digest state (encoding.BinaryMarshaler)
	FileHash   string `dynamodbav:"fileHash,omitempty"`  // hex SHA-256 of the content
	Offset     int64  `dynamodbav:"offset"`              // byte of the next unread line
	NextLine   int    `dynamodbav:"nextLine"`            // its 1-based number
	Parts      int    `dynamodbav:"parts"`               // result parts written
	Counts     Counts `dynamodbav:"counts"`
	// Lines counts the file's lines, found while hashing (which reads the
	// whole file anyway): newlines so far, then the total once hashed. With
	// NextLine it is the dashboard's progress (lines done of lines total).
	Lines int64 `dynamodbav:"lines,omitempty"`
	// Clock is the instant rows are validated at (card expiry), fixed for the
	// job so that a replayed row is judged exactly as the first time.
	Clock       time.Time `dynamodbav:"clock"`
	Invocations int       `dynamodbav:"invocations"`
	// Recoveries counts the times the job was found stuck and taken up again.
	Recoveries  int        `dynamodbav:"recoveries,omitempty"`
	Error       string     `dynamodbav:"error,omitempty"`
	Owner       string     `dynamodbav:"owner,omitempty"`
	LeaseUntil  int64      `dynamodbav:"leaseUntil,omitempty"` // unix ms
	CreatedAt   time.Time  `dynamodbav:"createdAt"`
	UpdatedAt   time.Time  `dynamodbav:"updatedAt"`
	CompletedAt *time.Time `dynamodbav:"completedAt,omitempty"`
	ExpiresAt   int64      `dynamodbav:"expiresAt"` // unix s (TTL)
}

// Finished reports whether nothing more will happen to the job.
func (j *Job) Finished() bool { return j.State == JobDone || j.State == JobFailed }

// JobID is the sort key of a file's job: the file name and the S3
// event's sequencer, which is the same for redeliveries of one event and
// different for every new upload of the key.
func JobID(file, sequencer string) string { return "file#" + file + "#" + sequencer }

// JobFilePrefix is what every job of a file name starts with.
func JobFilePrefix(file string) string { return "file#" + file + "#" }

// RowRecord is the dedupe record of one payment: the line that first
// claimed it owns it and fixes its payment request id; any other line with
// the same reference (or keyed fingerprint) is a duplicate of it.
type RowRecord struct {
	MerchantID string `dynamodbav:"-"`
	Key        string `dynamodbav:"-"` // BatchRowKeyOfReference or BatchRowKeyOfFingerprint

	// The line that owns the payment: job, file name and line number.
	JobID string `dynamodbav:"jobId"`
	File  string `dynamodbav:"file"`
	Row   int    `dynamodbav:"line"`

	// PaymentRequestID is fixed by the first claim: every later attempt at
	// the row charges (or finds) this very payment request.
	PaymentRequestID int64  `dynamodbav:"paymentRequestId"`
	Owner            string `dynamodbav:"owner"`
	LeaseUntil       int64  `dynamodbav:"leaseUntil,omitempty"` // unix ms, while charging
	Done             bool   `dynamodbav:"done"`
	// The stored result (Done): what the result file says for the row.
	Status        string `dynamodbav:"status,omitempty"`
	TransactionID string `dynamodbav:"transactionId,omitempty"`
	Code          string `dynamodbav:"code,omitempty"`
	Message       string `dynamodbav:"message,omitempty"`

	CreatedAt time.Time `dynamodbav:"createdAt"`
	ExpiresAt int64     `dynamodbav:"expiresAt"` // unix s (TTL)
}

// LeaseActive reports whether another holder may still be charging the row.
func (r *RowRecord) LeaseActive(now time.Time) bool {
	return !r.Done && r.LeaseUntil >= now.UnixMilli()
}

// Owns reports whether the record belongs to line row of job jobID.
func (r *RowRecord) Owns(jobID string, row int) bool { return r.JobID == jobID && r.Row == row }

// OpenJob names a job that is not finished, or whose work files may
// still exist.
type OpenJob struct {
	MerchantID, JobID string
	Since             time.Time // when the marker was written
}

// Object is an object of the batch bucket (SFTP uploads, a job's work
// files, result files).
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
	ETag         string // without quotes
}

// RowKeyOfReference is the dedupe key of a row with a Reference ID.
func RowKeyOfReference(ref string) string { return "ref#" + ref }

// RowKeyOfFingerprint is the dedupe key of a row without one: fp is a
// keyed fingerprint (never card data).
func RowKeyOfFingerprint(fp string) string { return "fp#" + fp }

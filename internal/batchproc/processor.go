// Package batchproc is the batch function (DESIGN §6): an uploaded batch
// file's S3 ObjectCreated event starts a job that streams the object with
// bounded memory, validates every line, charges each valid row exactly once
// and writes results/<merchantId>/<file>.result.csv, one line per input line.
//
// A job that does not fit in one invocation stops before the deadline at a
// line boundary, records the exact byte offset and line number reached, and
// queues a continuation message (offsets only, never card data) that the same
// function consumes to carry on with a ranged GET from that byte.
//
// Exactly-once charging rests on two conditional writes in DynamoDB:
//
//   - the job lease (one invocation works on a job at a time), and
//   - the row record per (merchant, SHA-256 of the file content, row number),
//     claimed before the row is charged: it fixes the payment request id the
//     row is charged as, and stores the row's result, so a redelivered or
//     concurrent event — or a re-upload of the same bytes — replays the row.
package batchproc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/s3store"
)

// Key prefixes of the batch bucket.
const (
	IncomingPrefix = "incoming/" // incoming/<merchantId>/<file>: uploads (SFTP /incoming)
	ResultsPrefix  = "results/"  // results/<merchantId>/<file>.result.csv (SFTP /results)
	WorkPrefix     = "work/"     // work/<merchantId>/<job>/: snapshot and result parts (never visible over SFTP)
	ResultSuffix   = ".result.csv"
)

// MaxFileSize is the largest file processed: the snapshot is one
// server-side copy, which S3 allows up to 5 GB.
const MaxFileSize = 5_000_000_000

// Config tunes the processor. Zero values select the defaults.
type Config struct {
	Bucket           string // the batch bucket (required)
	ContinueQueueURL string // the continuation queue (required)

	// TimeReserve: a run starts no new row once less than this is left before
	// the invocation's deadline; it then saves its progress and queues a
	// continuation (default 20 s).
	TimeReserve time.Duration
	// NoDeadline is the run time allowed when the context has no deadline
	// (default 10 min).
	NoDeadline time.Duration
	// MaxLinesPerRun ends a run after this many lines, MaxHashBytesPerRun
	// after hashing this many bytes (0: no limit). Tests set them to force
	// continuations.
	MaxLinesPerRun     int
	MaxHashBytesPerRun int64
	// Concurrency is how many rows are charged at once (default 16).
	Concurrency int
	// PartSize is how many result bytes are buffered before they are written
	// as a part object and the progress saved (default 1 MiB).
	PartSize int
	// RowLease is how long a claimed row is reserved for its charger
	// (default 2 min).
	RowLease time.Duration
	// LeaseMargin is how long the job lease outlives the invocation's
	// deadline (default 15 s).
	LeaseMargin time.Duration
	// Retention is how long job summaries and row records are kept; a file
	// uploaded again within it is recognised and not charged again
	// (default 400 days).
	Retention time.Duration
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TimeReserve, 20*time.Second)
	def(&c.NoDeadline, 10*time.Minute)
	def(&c.RowLease, 2*time.Minute)
	def(&c.LeaseMargin, 15*time.Second)
	def(&c.Retention, 400*24*time.Hour)
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.PartSize <= 0 {
		c.PartSize = 1 << 20
	}
}

// Store is the persistence the processor needs (*dynamo.Store).
type Store interface {
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	AcquireBatchJob(ctx context.Context, j *dynamo.BatchJob, owner string, now, until time.Time) (*dynamo.BatchJob, error)
	LeaseBatchJob(ctx context.Context, merchantID, jobID, owner string, now, until time.Time) (*dynamo.BatchJob, error)
	SaveBatchJob(ctx context.Context, j *dynamo.BatchJob, now time.Time) error
	ReleaseBatchJob(ctx context.Context, merchantID, jobID, owner string) error
	ClaimBatchRow(ctx context.Context, r *dynamo.BatchRow, now time.Time) (*dynamo.BatchRow, error)
	BatchRowRecord(ctx context.Context, merchantID, fileHash string, row int) (*dynamo.BatchRow, error)
	TakeOverBatchRow(ctx context.Context, r *dynamo.BatchRow, prevOwner string) error
	CompleteBatchRows(ctx context.Context, rows []*dynamo.BatchRow) error
	ReleaseBatchRow(ctx context.Context, r *dynamo.BatchRow) error
	ReassignBatchRow(ctx context.Context, r *dynamo.BatchRow, newID int64) error
}

// Sender queues a message (internal/queue).
type Sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Deps are the processor's collaborators.
type Deps struct {
	Store      Store
	Objects    *s3store.Store
	Charger    Charger
	Queue      Sender
	Currencies batch.CurrencyLookup // currency.Decimals
	Log        *slog.Logger
	Now        func() time.Time
	// NewID draws payment request ids (default ids.New).
	NewID func(time.Time) int64
}

// Processor is the batch function's handler.
type Processor struct {
	cfg Config
	Deps
}

// New checks the configuration and returns a Processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if cfg.Bucket == "" || cfg.ContinueQueueURL == "" {
		return nil, errors.New("batchproc: Bucket and ContinueQueueURL are required")
	}
	if d.Store == nil || d.Objects == nil || d.Charger == nil || d.Queue == nil || d.Currencies == nil {
		return nil, errors.New("batchproc: Store, Objects, Charger, Queue and Currencies are required")
	}
	cfg.setDefaults()
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.NewID == nil {
		d.NewID = ids.New
	}
	return &Processor{cfg: cfg, Deps: d}, nil
}

// Continuation is the message that carries a job over to the next
// invocation. It names the object and the exact position reached; the job
// record stays the source of truth. It never carries card data.
type Continuation struct {
	Bucket     string `json:"bucket"`
	Key        string `json:"key"`
	ETag       string `json:"etag"`
	MerchantID string `json:"merchantId"`
	JobID      string `json:"jobId"`
	Phase      string `json:"phase"`
	Offset     int64  `json:"offset"`
	NextLine   int    `json:"nextLine"`
	// Check marks a message queued by an invocation that found the job
	// leased by another: it continues the job only if that lease lapsed.
	Check bool `json:"check,omitempty"`
}

// ParseIncoming splits an incoming/<merchantId>/<file> key.
func ParseIncoming(key string) (merchantID, file string, ok bool) {
	rest, ok := strings.CutPrefix(key, IncomingPrefix)
	if !ok {
		return "", "", false
	}
	merchantID, file, ok = strings.Cut(rest, "/")
	if !ok || merchantID == "" || file == "" || strings.Contains(file, "/") {
		return "", "", false
	}
	return merchantID, file, true
}

// ResultKey is where the result of an uploaded file is written.
func ResultKey(merchantID, file string) string {
	return ResultsPrefix + merchantID + "/" + file + ResultSuffix
}

// HandleS3 processes S3 ObjectCreated events of the batch bucket's incoming/
// prefix. An error makes Lambda retry the event (asynchronous invocation);
// the job record makes that safe.
func (p *Processor) HandleS3(ctx context.Context, ev events.S3Event) error {
	var errs []error
	for _, rec := range ev.Records {
		if err := p.handleRecord(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Processor) handleRecord(ctx context.Context, rec events.S3EventRecord) error {
	if !strings.HasPrefix(rec.EventName, "ObjectCreated:") {
		return nil
	}
	if rec.S3.Bucket.Name != p.cfg.Bucket {
		p.Log.Warn("batch event for another bucket ignored", "bucket", rec.S3.Bucket.Name)
		return nil
	}
	// Keys in S3 event notifications are URL-encoded, spaces as "+".
	key, err := url.QueryUnescape(rec.S3.Object.Key)
	if err != nil {
		p.Log.Warn("batch event with an undecodable key ignored", "key", rec.S3.Object.Key)
		return nil
	}
	merchantID, file, ok := ParseIncoming(key)
	if !ok {
		p.Log.Warn("batch event outside incoming/<merchantId>/ ignored", "key", key)
		return nil
	}
	seq := rec.S3.Object.Sequencer
	if seq == "" {
		seq = s3store.CleanETag(rec.S3.Object.ETag)
	}
	now := p.Now().UTC()
	j := &dynamo.BatchJob{
		MerchantID: merchantID, JobID: dynamo.BatchJobID(file, seq), File: file, Bucket: rec.S3.Bucket.Name, Key: key,
		ETag: s3store.CleanETag(rec.S3.Object.ETag), Size: rec.S3.Object.Size, Sequencer: seq,
		ResultKey: ResultKey(merchantID, file), State: dynamo.BatchHashing, NextLine: 1, Clock: now,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(p.cfg.Retention).Unix(),
	}
	return p.run(ctx, j, true, false)
}

// HandleSQS consumes continuation messages (partial batch responses: a
// failed message is retried by SQS and lands in the DLQ after its
// maxReceiveCount).
func (p *Processor) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		var c Continuation
		if err := json.Unmarshal([]byte(m.Body), &c); err != nil || c.MerchantID == "" || c.JobID == "" {
			p.Log.Error("malformed batch continuation dropped", "messageId", m.MessageId)
			continue
		}
		j := &dynamo.BatchJob{MerchantID: c.MerchantID, JobID: c.JobID}
		if err := p.run(ctx, j, false, c.Check); err != nil {
			p.Log.Error("batch continuation failed; it will be retried", "merchantId", c.MerchantID, "jobId", c.JobID, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

// Handle is the Lambda entry point of a function with both triggers: it
// dispatches on the event source of the records.
func (p *Processor) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil || len(probe.Records) == 0 {
		return nil, fmt.Errorf("batch: unsupported event")
	}
	switch src := probe.Records[0].EventSource; src {
	case "aws:s3":
		var ev events.S3Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		return nil, p.HandleS3(ctx, ev)
	case "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		return p.HandleSQS(ctx, ev)
	default:
		return nil, fmt.Errorf("batch: unsupported event source %q", src)
	}
}

// run takes the job (creating it for an S3 event) and works on it until it
// is done or the invocation's budget is spent.
func (p *Processor) run(ctx context.Context, j *dynamo.BatchJob, create, check bool) error {
	owner := newToken()
	now := p.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(p.cfg.NoDeadline)
	}
	until := deadline.Add(p.cfg.LeaseMargin)
	var job *dynamo.BatchJob
	var err error
	if create {
		job, err = p.Store.AcquireBatchJob(ctx, j, owner, now, until)
	} else {
		job, err = p.Store.LeaseBatchJob(ctx, j.MerchantID, j.JobID, owner, now, until)
	}
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		p.Log.Warn("batch continuation for an unknown job dropped", "merchantId", j.MerchantID, "jobId", j.JobID)
		return nil
	case errors.Is(err, dynamo.ErrBatchJobBusy):
		// Another invocation works on it. Should it die, its lease lapses:
		// look again then, so the job never stalls.
		p.Log.Info("batch job busy in another invocation", "merchantId", job.MerchantID, "jobId", job.JobID, "check", check)
		return p.schedule(ctx, job, time.Until(time.UnixMilli(job.LeaseUntil))+2*time.Second, true)
	case err != nil:
		return err
	case job.Finished():
		p.Log.Info("batch job already finished", "merchantId", job.MerchantID, "jobId", job.JobID, "state", job.State)
		return nil
	}
	job.Owner, job.LeaseUntil = owner, until.UnixMilli()
	r := &jobRun{p: p, job: job, stopAt: deadline.Add(-p.cfg.TimeReserve), log: p.Log.With("merchantId", job.MerchantID, "jobId", job.JobID)}
	err = r.work(ctx)
	if errors.Is(err, dynamo.ErrConflict) {
		r.log.Warn("batch job taken over by another invocation; stopping")
		return nil
	}
	if err != nil {
		r.log.Error("batch job run failed", "state", job.State, "error", err.Error())
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = p.Store.ReleaseBatchJob(rctx, job.MerchantID, job.JobID, owner)
		cancel()
		return err
	}
	return nil
}

// schedule queues a continuation of job after delay.
func (p *Processor) schedule(ctx context.Context, job *dynamo.BatchJob, delay time.Duration, check bool) error {
	c := Continuation{Bucket: job.Bucket, Key: job.Key, ETag: job.ETag, MerchantID: job.MerchantID, JobID: job.JobID,
		Phase: job.State, Offset: job.Offset, NextLine: job.NextLine, Check: check}
	if err := p.Queue.Send(ctx, p.cfg.ContinueQueueURL, c, delay); err != nil {
		return fmt.Errorf("queue batch continuation: %w", err)
	}
	return nil
}

// jobRun is one invocation's work on a job.
type jobRun struct {
	p      *Processor
	job    *dynamo.BatchJob
	stopAt time.Time
	lines  int   // lines handled in this run
	hashed int64 // bytes hashed in this run
	log    *slog.Logger

	doneMu   sync.Mutex
	doneRows []*dynamo.BatchRow // charged rows whose results are not stored yet
}

// outOfBudget reports whether the run must stop starting lines. Every run
// handles at least one line, so a job always makes progress.
func (r *jobRun) outOfBudget() bool {
	if r.lines == 0 {
		return false
	}
	if r.p.cfg.MaxLinesPerRun > 0 && r.lines >= r.p.cfg.MaxLinesPerRun {
		return true
	}
	return r.p.Now().After(r.stopAt)
}

func (r *jobRun) work(ctx context.Context) error {
	m, err := r.p.Store.Merchant(ctx, r.job.MerchantID)
	if errors.Is(err, dynamo.ErrNotFound) {
		return r.fail(ctx, "no merchant "+r.job.MerchantID)
	}
	if err != nil {
		return err
	}
	for {
		var finished bool
		switch r.job.State {
		case dynamo.BatchHashing:
			finished, err = r.hash(ctx)
		case dynamo.BatchCharging:
			finished, err = r.charge(ctx, m)
		case dynamo.BatchAssembling:
			finished, err = true, r.assemble(ctx)
		default: // done, failed
			return nil
		}
		if err != nil {
			return err
		}
		if !finished {
			return r.pause(ctx)
		}
	}
}

// pause hands the job to the next invocation: the progress is saved, the
// lease released and a continuation queued.
func (r *jobRun) pause(ctx context.Context) error {
	if err := r.save(ctx); err != nil {
		return err
	}
	if err := r.p.Store.ReleaseBatchJob(ctx, r.job.MerchantID, r.job.JobID, r.job.Owner); err != nil {
		return err
	}
	r.log.Info("batch job continues in a new invocation", "state", r.job.State, "offset", r.job.Offset,
		"nextLine", r.job.NextLine, "hashOffset", r.job.HashOffset)
	// If this fails the invocation fails and is retried, which continues the job.
	return r.p.schedule(ctx, r.job, 0, false)
}

func (r *jobRun) save(ctx context.Context) error {
	return r.p.Store.SaveBatchJob(ctx, r.job, r.p.Now())
}

// fail ends a job that cannot be processed; its input stays in incoming/
// until the bucket's lifecycle rule removes it.
func (r *jobRun) fail(ctx context.Context, reason string) error {
	now := r.p.Now().UTC()
	r.job.State, r.job.Error, r.job.CompletedAt, r.job.LeaseUntil = dynamo.BatchFailed, reason, &now, 0
	r.log.Warn("batch job failed", "reason", reason)
	return r.save(ctx)
}

// workDir is the job's private prefix for its snapshot and result parts.
func (r *jobRun) workDir() string {
	sum := sha256.Sum256([]byte(r.job.JobID))
	return WorkPrefix + r.job.MerchantID + "/" + hex.EncodeToString(sum[:8]) + "/"
}

func (r *jobRun) partKey(n int) string { return fmt.Sprintf("%spart-%06d", r.workDir(), n) }

// snapshot copies the upload into the job's work prefix (server-side, one
// call): every byte range of every invocation then reads the same bytes,
// even if the merchant uploads a new file under the same name meanwhile.
func (r *jobRun) snapshot(ctx context.Context) (bool, error) {
	if r.job.Size > MaxFileSize {
		return false, r.fail(ctx, fmt.Sprintf("the file is larger than %d bytes", int64(MaxFileSize)))
	}
	key := r.workDir() + "input"
	_, err := r.p.Objects.Copy(ctx, r.job.Key, key, r.job.ETag)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, r.fail(ctx, "the uploaded file no longer exists")
	case errors.Is(err, s3store.ErrChanged):
		return false, r.fail(ctx, "the uploaded file was replaced by a newer upload before processing started")
	case err != nil:
		return false, err
	}
	r.job.Snapshot = key
	return true, r.save(ctx)
}

// hash computes the SHA-256 of the content, resumably: the digest state is
// saved with the offset when the budget runs out.
func (r *jobRun) hash(ctx context.Context) (bool, error) {
	if r.job.Snapshot == "" {
		if ok, err := r.snapshot(ctx); !ok || err != nil {
			return ok, err
		}
	}
	h, err := resumeHash(r.job.HashState)
	if err != nil {
		return false, err
	}
	body, err := r.p.Objects.GetRange(ctx, r.job.Snapshot, r.job.HashOffset, "")
	if err != nil {
		return false, err
	}
	defer body.Close()
	buf := make([]byte, 256<<10)
	if max := r.p.cfg.MaxHashBytesPerRun; max > 0 && max < int64(len(buf)) {
		buf = buf[:max]
	}
	for {
		n, err := io.ReadFull(body, buf)
		h.Write(buf[:n])
		r.job.HashOffset += int64(n)
		r.hashed += int64(n)
		if err != nil {
			if !isEOF(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return false, r.saveHash(ctx, h, err)
			}
			break
		}
		max := r.p.cfg.MaxHashBytesPerRun
		if r.p.Now().After(r.stopAt) || (max > 0 && r.hashed >= max) {
			return false, r.saveHash(ctx, h, nil)
		}
	}
	r.job.FileHash = hex.EncodeToString(h.Sum(nil))
	r.job.HashState, r.job.State, r.job.Offset, r.job.NextLine = nil, dynamo.BatchCharging, 0, 1
	return true, r.save(ctx)
}

func (r *jobRun) saveHash(ctx context.Context, h hashState, cause error) error {
	st, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	r.job.HashState = st
	if cause != nil {
		return errors.Join(cause, r.save(ctx))
	}
	return nil // saved by pause
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

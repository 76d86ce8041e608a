// Package batchproc is the batch function (docs/batch.md): an uploaded batch
// file's S3 ObjectCreated event starts a job that streams the object with
// bounded memory, validates every line, charges each valid row exactly once
// and writes results/<merchantId>/<file>.result.csv, one line per input line.
//
// A job that does not fit in one invocation stops before the deadline at a
// line boundary, records the exact byte offset and line number reached, and
// queues a continuation message (offsets only, never card data) that the same
// function consumes to carry on with a ranged GET from that byte.
//
// At-most-once charging rests on two conditional writes in DynamoDB:
//
//   - the job lease (one invocation works on a job at a time), and
//   - the row record per payment of a merchant — its Reference ID, or for a
//     row without one a keyed fingerprint of (card, amount, unit) valid for
//     a day — claimed before the row is charged: it names the job and line
//     that own the payment, fixes the payment request id the row is charged
//     as and stores the row's result. The owning line replays it after a
//     crash or redelivery; any other line, in this file or another, is
//     reported `duplicate` with the original ids and charges nothing.
//
// A job whose invocation died is found by RecoverStuck (called on the
// reconciler's schedule) and resumed, or after MaxRecoveries abandoned: its
// remaining lines are reported without charging. Either way it ends, and its
// card-bearing snapshot and upload are deleted when it ends.
//
// batch (package internal/batch) is the file format alone; batchproc runs
// the jobs; internal/wire/batchwire builds a Processor from the function's
// environment.
//
// Not to be confused with internal/batch (the file format it reads) or internal/batchwire (its wiring).
package batchproc

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
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
	// Retention is how long job summaries and the records of rows with a
	// Reference ID are kept: a reference used again within it is a duplicate
	// (default 400 days).
	Retention time.Duration
	// FingerprintWindow is how long a row without a Reference ID makes a row
	// with the same card, amount and unit a duplicate (default 24 h).
	FingerprintWindow time.Duration
	// StuckAfter: a job without a lease and not updated for this long was
	// dropped (its continuation or retries lost) and is taken up by
	// RecoverStuck (default 2 min). A job whose lease lapsed is stuck at once.
	StuckAfter time.Duration
	// MaxRecoveries is how many times RecoverStuck resumes a job before it
	// abandons it: the remaining lines are then reported, not charged
	// (default 3).
	MaxRecoveries int

	// Sharing the acquirer (docs/batch.md, "Shoppers first, merchants
	// fair"). Slice ends a run after this long (0: at the deadline): the
	// job re-queues its continuation at the back of the queue, so the jobs
	// of all merchants take turns at the queue's bounded concurrency.
	Slice time.Duration
	// RowsPerSecond is the batch share of the acquirer's budget in rows a
	// second, all invocations together (0: unpaced). A run paces its rows at
	// RowsPerSecond / min(M, QueueConcurrency), M the merchants with open
	// files (only a merchant's oldest file charges): with M ≥ Q the queue's
	// Q invocations split the share, with fewer merchants each running job
	// gets a bigger part, so a lone large file still uses the whole share.
	RowsPerSecond    float64
	QueueConcurrency int
	// QueueCharging: only continuation-queue invocations charge. An upload
	// event's or the recovery schedule's run hashes, then queues the job, so
	// every acquirer call happens under the queue's maximum concurrency.
	QueueCharging bool
	// MerchantOrder: a job starts charging only when no older file of its
	// merchant is still open; it looks again after OrderWait (default 2 s).
	MerchantOrder bool
	OrderWait     time.Duration
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
	def(&c.FingerprintWindow, 24*time.Hour)
	def(&c.StuckAfter, 2*time.Minute)
	if c.MaxRecoveries <= 0 {
		c.MaxRecoveries = 3
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.PartSize <= 0 {
		c.PartSize = 1 << 20
	}
	def(&c.OrderWait, 2*time.Second)
}

// Objects is the batch bucket as the processor uses it (s3store.Store).
// A missing object is a NotFound error (errkind); a copy or read
// whose ETag condition fails is a Conflict error (errkind).
type Objects interface {
	// Put stores body under key; a body that is not an io.ReadSeeker is
	// streamed (a multipart upload above one part), with memory bounded.
	Put(ctx context.Context, key string, body io.Reader, size int64) (string, error)
	PutBytes(ctx context.Context, key string, b []byte) (string, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// GetRange streams key from byte offset on (empty at or past the end);
	// with etag set the object must have that ETag.
	GetRange(ctx context.Context, key string, offset int64, etag string) (io.ReadCloser, error)
	Head(ctx context.Context, key string) (batch.Object, error)
	// Copy copies src to dst server-side; with etag set src must have it.
	Copy(ctx context.Context, src, dst, etag string) (string, error)
	// List returns the objects under prefix in key order.
	List(ctx context.Context, prefix string) ([]batch.Object, error)
	Remove(ctx context.Context, key string) error
	// RemoveAll deletes keys; missing ones are not an error.
	RemoveAll(ctx context.Context, keys []string) error
}

// Sender queues a message (internal/queue).
type Sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Deps are the processor's collaborators.
type Deps struct {
	// Store is every storage role (store.go); New gives each part its own.
	Store      Store
	Objects    Objects
	Charger    Charger
	Queue      Sender
	Currencies batch.CurrencyLookup // currency.Decimals
	Log        *slog.Logger
	Now        func() time.Time
	// NewID draws payment request ids (default ids.New).
	NewID func(time.Time) int64
	// FingerprintKey keys the fingerprint of rows without a Reference ID
	// (HMAC-SHA256; at least 32 bytes, see FingerprintKeyFrom). Without the
	// key nobody can test a guessed card number against stored fingerprints.
	FingerprintKey []byte
}

// FingerprintKeyFrom derives the fingerprint key from a service secret (the
// SEAL_KEY), so that no new secret has to be deployed.
func FingerprintKeyFrom(secret string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("payreq batch row fingerprint v1"))
	return mac.Sum(nil)
}

// Processor is the batch function's handler.
type Processor struct {
	cfg Config
	Deps
	stores // Deps.Store by role (store.go)
	// crashAt, set by tests only, makes hit fail at a crash point as if the
	// process died there: the run stops without any clean-up.
	crashAt func(point string) bool
}

// crashError is a simulated death at a crash point (tests).
type crashError struct{ point string }

func (e crashError) Error() string { return "simulated crash at " + e.point }

func isCrash(err error) bool {
	var c crashError
	return errors.As(err, &c)
}

// hit marks a crash point: a crashtest build dies here when told to, and a
// test's crashAt makes the run stop here without cleaning up.
func (p *Processor) hit(point string) error {
	crashpoint.Hit(point)
	if p.crashAt != nil && p.crashAt(point) {
		return crashError{point}
	}
	return nil
}

// rowKey is the dedupe key of a row and how long it holds.
func (p *Processor) rowKey(row batch.Row) (string, time.Duration) {
	if row.ReferenceID != "" {
		return batch.RowKeyOfReference(row.ReferenceID), p.cfg.Retention
	}
	mac := hmac.New(sha256.New, p.FingerprintKey)
	// Canonical forms: "4111 1111-1111 1111" is the card 4111111111111111,
	// 10.50 is 10.5. Separated by NUL so fields cannot run into each other.
	mac.Write([]byte("v1\x00" + card.Normalize(row.CardNumber) + "\x00" + row.Amount.String() + "\x00" + row.Unit))
	return batch.RowKeyOfFingerprint(hex.EncodeToString(mac.Sum(nil))), p.cfg.FingerprintWindow
}

// New checks the configuration and returns a Processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if cfg.Bucket == "" || cfg.ContinueQueueURL == "" {
		return nil, errors.New("batchproc: Bucket and ContinueQueueURL are required")
	}
	if d.Store == nil || d.Objects == nil || d.Charger == nil || d.Queue == nil || d.Currencies == nil {
		return nil, errors.New("batchproc: Store, Objects, Charger, Queue and Currencies are required")
	}
	if len(d.FingerprintKey) < 32 {
		return nil, errors.New("batchproc: FingerprintKey of at least 32 bytes is required")
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
	return &Processor{cfg: cfg, Deps: d, stores: storesOf(d.Store)}, nil
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
		seq = strings.Trim(rec.S3.Object.ETag, `"`)
	}
	now := p.Now().UTC()
	j := &batch.Job{
		MerchantID: merchantID, JobID: batch.JobID(file, seq), File: file, Bucket: rec.S3.Bucket.Name, Key: key,
		ETag: strings.Trim(rec.S3.Object.ETag, `"`), Size: rec.S3.Object.Size, Sequencer: seq,
		ResultKey: ResultKey(merchantID, file), State: batch.JobHashing, NextLine: 1, Clock: now,
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
		j := &batch.Job{MerchantID: c.MerchantID, JobID: c.JobID}
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
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("batch: unsupported event")
	}
	if probe.Source == "aws.events" && probe.DetailType == "Scheduled Event" {
		// The template's schedule: resume or abandon jobs a crash left
		// behind, and delete their card-bearing work files.
		rep, err := p.RecoverStuck(ctx, p.Now())
		return rep, err
	}
	if len(probe.Records) == 0 {
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

// budget is the invocation's deadline and the job lease, which outlives it
// by LeaseMargin, on the processor's clock: the context's deadline is on the
// real one, and leases are compared with p.Now (which a test moves).
func (p *Processor) budget(ctx context.Context, now time.Time) (deadline, until time.Time) {
	left := p.cfg.NoDeadline
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	deadline = now.Add(left)
	return deadline, deadline.Add(p.cfg.LeaseMargin)
}

// errLeaseLost: the job's lease is another invocation's now (it lapsed and
// was taken over). Only this stops a run quietly; any other failure,
// conflicts on rows or payments included, fails the invocation so that it
// is retried.
var errLeaseLost = errors.New("batch job lease lost to another invocation")

// run takes the job (creating it for an S3 event) and works on it until it
// is done or the invocation's budget is spent.
func (p *Processor) run(ctx context.Context, j *batch.Job, create, check bool) error {
	owner := newToken()
	now := p.Now()
	deadline, until := p.budget(ctx, now)
	var job *batch.Job
	var err error
	if create {
		job, err = p.jobs.AcquireBatchJob(ctx, j, owner, now, until)
	} else {
		job, err = p.jobs.LeaseBatchJob(ctx, j.MerchantID, j.JobID, owner, now, until)
	}
	switch {
	case errkind.Is(err, errkind.NotFound):
		p.Log.Warn("batch continuation for an unknown job dropped", "merchantId", j.MerchantID, "jobId", j.JobID)
		return nil
	case errkind.Is(err, errkind.Conflict):
		// Another invocation works on it. Should it die, its lease lapses:
		// look again then, so the job never stalls.
		p.Log.Info("batch job busy in another invocation", "merchantId", job.MerchantID, "jobId", job.JobID, "check", check)
		return p.schedule(ctx, job, time.UnixMilli(job.LeaseUntil).Sub(p.Now())+2*time.Second, true)
	case err != nil:
		return err
	case job.Finished():
		// A retry of the run that finished it, whose last save's answer was
		// lost: remove the card data it leaves now rather than at the
		// recovery's next pass.
		p.Log.Info("batch job already finished", "merchantId", job.MerchantID, "jobId", job.JobID, "state", job.State)
		p.newRun(job).cleanup(ctx)
		return nil
	}
	return p.runJob(withQueued(ctx, !create), job, owner, until, deadline)
}

type queuedKey struct{}

// withQueued marks a run of a continuation-queue invocation.
func withQueued(ctx context.Context, q bool) context.Context {
	return context.WithValue(ctx, queuedKey{}, q)
}

// runJob works on a job whose lease owner holds until `until`.
func (p *Processor) runJob(ctx context.Context, job *batch.Job, owner string, until, deadline time.Time) error {
	job.Owner, job.LeaseUntil = owner, until.UnixMilli()
	r := p.newRun(job)
	r.stopAt = deadline.Add(-p.cfg.TimeReserve)
	if s := p.cfg.Slice; s > 0 && p.Now().Add(s).Before(r.stopAt) {
		r.stopAt = p.Now().Add(s)
	}
	r.queued, _ = ctx.Value(queuedKey{}).(bool)
	if p.cfg.RowsPerSecond > 0 {
		r.pace = newPacer(p.cfg.RowsPerSecond / float64(p.sharers(ctx)))
	}
	err := r.work(ctx)
	if isCrash(err) {
		return err // a dead process cleans nothing up
	}
	if errors.Is(err, errLeaseLost) {
		// The new holder continues the job (and should it die, its lease
		// lapses and RecoverStuck resumes the job).
		r.log.Warn("batch job taken over by another invocation; stopping")
		return nil
	}
	if err != nil {
		r.log.Error("batch job run failed", "state", job.State, "error", err.Error())
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = p.jobs.ReleaseBatchJob(rctx, job.MerchantID, job.JobID, owner)
		cancel()
		return err
	}
	return nil
}

func (p *Processor) newRun(job *batch.Job) *jobRun {
	return &jobRun{p: p, job: job, log: p.Log.With("merchantId", job.MerchantID, "jobId", job.JobID)}
}

// schedule queues a continuation of job after delay.
func (p *Processor) schedule(ctx context.Context, job *batch.Job, delay time.Duration, check bool) error {
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
	job    *batch.Job
	stopAt time.Time
	lines  int   // lines handled in this run
	hashed int64 // bytes hashed in this run
	log    *slog.Logger

	queued bool   // a continuation-queue invocation (QueueCharging)
	pace   *pacer // RowsPerSecond; nil: unpaced

	// throttled: a row came back not processed (the acquirer rate limited
	// it); no new line starts and the job continues after delay.
	throttled atomic.Bool
	delay     time.Duration

	doneMu   sync.Mutex
	doneRows []*batch.RowRecord // charged rows whose results are not stored yet
	crashed  atomic.Bool        // a simulated crash: no clean-up at all
}

// outOfBudget reports whether the run must stop starting lines. Every run
// handles at least one line, so a job always makes progress.
func (r *jobRun) outOfBudget() bool {
	if r.lines == 0 {
		return false
	}
	if r.throttled.Load() {
		return true
	}
	if r.p.cfg.MaxLinesPerRun > 0 && r.lines >= r.p.cfg.MaxLinesPerRun {
		return true
	}
	return r.p.Now().After(r.stopAt)
}

func (r *jobRun) work(ctx context.Context) error {
	m, err := r.p.merch.Merchant(ctx, r.job.MerchantID)
	if errkind.Is(err, errkind.NotFound) {
		return r.fail(ctx, "no merchant "+r.job.MerchantID)
	}
	if err != nil {
		return err
	}
	for {
		var finished bool
		switch r.job.State {
		case batch.JobHashing:
			finished, err = r.hash(ctx)
		case batch.JobCharging, batch.JobReporting:
			if r.p.cfg.QueueCharging && !r.queued {
				// Acquirer calls only under the queue's concurrency.
				return r.pause(ctx)
			}
			if wait, werr := r.behindOlderFile(ctx); werr != nil || wait {
				if werr != nil {
					return werr
				}
				r.delay = r.p.cfg.OrderWait
				return r.pause(ctx)
			}
			finished, err = r.charge(ctx, m)
		case batch.JobAssembling:
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
	if err := r.p.jobs.ReleaseBatchJob(ctx, r.job.MerchantID, r.job.JobID, r.job.Owner); err != nil {
		if errkind.Is(err, errkind.Conflict) {
			return errLeaseLost // the holder queues its own continuation
		}
		return err
	}
	r.log.Info("batch job continues in a new invocation", "state", r.job.State, "offset", r.job.Offset,
		"nextLine", r.job.NextLine, "hashOffset", r.job.HashOffset)
	// If this fails the invocation fails and is retried, which continues the job.
	return r.p.schedule(ctx, r.job, r.delay, false)
}

// save writes the job's progress while this run holds its lease.
func (r *jobRun) save(ctx context.Context) error {
	err := r.p.jobs.SaveBatchJob(ctx, r.job, r.p.Now())
	if errkind.Is(err, errkind.Conflict) {
		return errLeaseLost
	}
	return err
}

// fail ends a job that cannot be processed at all (no result file).
func (r *jobRun) fail(ctx context.Context, reason string) error {
	now := r.p.Now().UTC()
	r.job.State, r.job.Error, r.job.CompletedAt, r.job.LeaseUntil = batch.JobFailed, reason, &now, 0
	r.log.Warn("batch job failed", "reason", reason)
	if err := r.save(ctx); err != nil {
		return err
	}
	r.cleanup(ctx)
	return nil
}

// cleanup removes what a finished job leaves with card data in it — its
// work files (the snapshot) and its upload — then its open marker. Failures
// are logged: the marker stays, and RecoverStuck cleans up within minutes.
func (r *jobRun) cleanup(ctx context.Context) bool {
	err := r.removeInput(ctx)
	if err == nil {
		var objs []batch.Object
		if objs, err = r.p.Objects.List(ctx, r.workDir()); err == nil && len(objs) > 0 {
			keys := make([]string, len(objs))
			for i, o := range objs {
				keys[i] = o.Key
			}
			err = r.p.Objects.RemoveAll(ctx, keys)
		}
	}
	if err == nil {
		err = r.p.jobs.CloseBatchJob(ctx, r.job.MerchantID, r.job.JobID)
	}
	if err != nil {
		r.log.Warn("batch job files not removed yet; the recovery retries", "error", err.Error())
		return false
	}
	return true
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
	case errkind.Is(err, errkind.NotFound):
		return false, r.fail(ctx, "the uploaded file no longer exists")
	case errkind.Is(err, errkind.Conflict):
		return false, r.fail(ctx, "the uploaded file was replaced by a newer upload before processing started")
	case err != nil:
		return false, err
	}
	if err := r.p.hit(crashpoint.BatchAfterSnapshot); err != nil {
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
	endsInNewline := true // as far as this run knows: a resumed run's first read may be empty
	for {
		n, err := io.ReadFull(body, buf)
		h.Write(buf[:n])
		r.job.Lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if n > 0 {
			endsInNewline = buf[n-1] == '\n'
		}
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
	if !endsInNewline && r.job.HashOffset > 0 {
		r.job.Lines++ // the last line has no newline
	}
	r.job.HashState, r.job.State, r.job.Offset, r.job.NextLine = nil, batch.JobCharging, 0, 1
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

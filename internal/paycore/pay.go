package paycore

// The normal payment path, in the order an attempt takes it: the lease on
// the request (Pay, CreateAndPay, PayNew), the write-ahead transaction, the
// limits, the charge, and the record of its outcome (complete.go commits it).

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/asyncjob"
)

// Pay runs attempt a on payment request requestID of merchant m. A processed
// attempt (approved, declined — limits included — or pending) is a Result;
// invalid input, an unknown request, a paid or cancelled request and a
// concurrent attempt are *errkind.Error errors (invalid, not found, conflict).
//
// With an Idempotency-Key, the transaction id is derived from the key's
// record (ids.SeedFrom), so a retry after a crash finds the attempt the first
// try started and resumes it instead of charging again.
func (s *Service) Pay(ctx context.Context, m *merchant.Merchant, requestID int64, a Attempt) (Result, error) {
	now := s.Now()
	det, err := s.validate(m, &a, now)
	if err != nil {
		return Result{}, err
	}
	txID := attemptID(ctx, now)
	req, err := s.leases.LeasePaymentRequest(ctx, s.lease(requestID, m.ID, txID, a, now))
	if errkind.Is(err, errkind.Conflict) {
		return s.leaseRefused(ctx, m, requestID, txID, a, det, now)
	}
	if err != nil {
		return Result{}, err
	}
	crashpoint.Hit(crashpoint.AfterLease)
	return s.run(ctx, m, req, txID, a, det)
}

func (s *Service) lease(requestID int64, merchantID string, txID int64, a Attempt, now time.Time) payment.Lease {
	return payment.Lease{RequestID: requestID, MerchantID: merchantID, TransactionID: txID,
		Now: now, Until: now.Add(s.SyncLease), Amount: a.Amount, Unit: a.Unit}
}

// attemptID is the id of a new attempt's transaction: derived from the
// Idempotency-Key record when there is one, else random.
func attemptID(ctx context.Context, now time.Time) int64 {
	if seed := ids.SeedFrom(ctx); seed != nil {
		return ids.Derive(seed, "transaction")
	}
	return ids.New(now)
}

// CreateAndPay stores the validated request r (no id yet) for merchant m
// with the attempt lease already taken, then runs a on it: the
// "amount + unit" form of POST /payments/h2h/{n}. With an Idempotency-Key
// both ids are derived from the key, so a retry resumes the same request.
func (s *Service) CreateAndPay(ctx context.Context, m *merchant.Merchant, r payment.Request, a Attempt) (Result, error) {
	now := s.Now()
	det, err := s.validate(m, &a, now)
	if err != nil {
		return Result{}, err
	}
	txID := attemptID(ctx, now)
	if err := s.routeAttempt(ctx, m, &a, det, r.Amount, r.Unit, payment.ChargeReference(txID)); err != nil {
		return Result{}, err
	}
	if err := s.checkAttempt(a, r.Amount, r.Unit); err != nil {
		return Result{}, err
	}
	seed := ids.SeedFrom(ctx)
	r.MerchantID, r.Status, r.CreatedAt, r.UpdatedAt = m.ID, payment.RequestUnpaid, now.UTC(), now.UTC()
	for try := 0; ; try++ {
		r.ID = ids.New(now)
		if seed != nil && try == 0 {
			r.ID = ids.Derive(seed, "payment-request")
		}
		var (
			tx      *payment.Transaction
			written bool
		)
		tx, written, err = s.createLeased(ctx, m, &r, txID, a, det)
		if errkind.Is(err, errkind.Exists) && seed != nil && try == 0 {
			// Created by an earlier try with this key (or, astronomically
			// rarely, a collision: then the request is not ours).
			cur, lease, gerr := s.leases.PaymentRequestLease(ctx, r.ID)
			if gerr != nil {
				return Result{}, gerr
			}
			if cur.MerchantID == m.ID && (lease.TransactionID == txID || cur.TransactionID == txID) {
				return s.resume(ctx, m, cur, txID, a, det)
			}
			s.Log.Error("derived payment request id taken by another request; drawing a random one", "payment_request_id", r.ID)
		}
		if err == nil {
			crashpoint.Hit(crashpoint.AfterLease)
			return s.attempt(ctx, m, &r, tx, a, det, written)
		}
		if !errkind.Is(err, errkind.Exists) || try == 3 {
			return Result{}, fmt.Errorf("create payment request for merchant %s: %w", m.ID, err)
		}
	}
}

// PayNew creates payment request r (its id set by the caller) for merchant
// m with the attempt lease already taken, and runs a on it: the batch's row
// payments, whose request ids the batch fixed. An Exists error when the
// request exists: nothing was written, the caller decides. The transaction
// id comes from ctx's seed (ids.WithSeed) when there is one.
func (s *Service) PayNew(ctx context.Context, m *merchant.Merchant, r payment.Request, a Attempt) (Result, error) {
	now := s.Now()
	det, err := s.validate(m, &a, now)
	if err != nil {
		return Result{}, err
	}
	txID := attemptID(ctx, now)
	if err := s.routeAttempt(ctx, m, &a, det, r.Amount, r.Unit, payment.ChargeReference(txID)); err != nil {
		return Result{}, err
	}
	if err := s.checkAttempt(a, r.Amount, r.Unit); err != nil {
		return Result{}, err
	}
	r.MerchantID, r.Status, r.CreatedAt, r.UpdatedAt = m.ID, payment.RequestUnpaid, now.UTC(), now.UTC()
	tx, written, err := s.createLeased(ctx, m, &r, txID, a, det)
	if err != nil {
		return Result{}, err
	}
	crashpoint.Hit(crashpoint.AfterLease)
	return s.attempt(ctx, m, &r, tx, a, det, written)
}

// createLeased stores new request r leased by transaction txID. Without
// count or total limits nothing has to happen between the lease and the
// write-ahead record, so the request and the waiting transaction are one
// write (written); limits reserve their counters in between (the hold is
// part of the record), so with them only the request is written here. tx
// is the attempt's transaction, stored or to be written ahead. Exists
// when r's id is taken (an Exists error).
func (s *Service) createLeased(ctx context.Context, m *merchant.Merchant, r *payment.Request, txID int64, a Attempt, det *card.Details) (tx *payment.Transaction, written bool, err error) {
	until := s.Now().Add(s.SyncLease)
	if Caps(m.Limits).Any() {
		return s.newTransaction(m, r, txID, a, det), false, s.leases.CreateLeasedPaymentRequest(ctx, r, txID, until)
	}
	for try := 0; ; try++ {
		tx = s.newTransaction(m, r, txID, a, det)
		err = s.leases.CreateLeasedRequestWithTransaction(ctx, r, tx, until)
		if !errkind.Is(err, errkind.Conflict) || try == 3 {
			return tx, err == nil, err
		}
		// A collision of the transaction id only: nothing was written.
		s.Log.Warn("transaction id collision; drawing another", "transaction_id", txID)
		txID = ids.New(s.Now())
	}
}

// leaseRefused explains a failed lease (one extra read, off the happy path),
// resumes this attempt when a crashed try of it holds the lease, and drives
// an expired attempt of someone else to its end before taking over.
func (s *Service) leaseRefused(ctx context.Context, m *merchant.Merchant, id, txID int64, a Attempt, det *card.Details, now time.Time) (Result, error) {
	req, lease, err := s.leases.PaymentRequestLease(ctx, id)
	if errkind.Is(err, errkind.NotFound) || (err == nil && req.MerchantID != m.ID) {
		return Result{}, errkind.NotFoundErr(fmt.Sprintf("Payment request %d does not exist.", id))
	}
	if err != nil {
		return Result{}, err
	}
	if lease.TransactionID == txID || req.TransactionID == txID {
		return s.resume(ctx, m, req, txID, a, det) // a retry of this very attempt
	}
	switch {
	case req.Status == payment.RequestPaid:
		return Result{}, errkind.ConflictErr(fmt.Sprintf("Payment request %d is already paid.", id), "")
	case req.Status == payment.RequestCancelled:
		return Result{}, errkind.ConflictErr(fmt.Sprintf("Payment request %d is cancelled.", id), codes.TransactionCancelled)
	case a.Amount != nil && !a.Amount.Equal(req.Amount):
		return Result{}, errkind.Validation([]errkind.FieldError{{Field: "amount", Code: codes.InvalidAmount,
			Detail: "amount does not match the payment request's amount " + req.Amount.String()}})
	case a.Unit != "" && a.Unit != req.Unit:
		return Result{}, errkind.Validation([]errkind.FieldError{{Field: "unit", Code: codes.InvalidCurrency,
			Detail: "unit does not match the payment request's unit " + req.Unit}})
	case lease.Active(now):
		superseded, after, err := s.supersedeChallenge(ctx, lease.TransactionID, a, now)
		if err != nil {
			return Result{}, err
		}
		if !superseded {
			wait := time.UnixMilli(lease.Until).Sub(now)
			if after > 0 && after < wait {
				wait = after // the challenge can be superseded sooner
			}
			return Result{}, busy(id, wait)
		}
		req, err = s.leases.LeasePaymentRequest(ctx, s.lease(id, m.ID, txID, a, now))
		if errkind.Is(err, errkind.Conflict) {
			return Result{}, s.stateProblem(ctx, id)
		}
		if err != nil {
			return Result{}, err
		}
		return s.run(ctx, m, req, txID, a, det)
	case lease.TransactionID != 0:
		// An attempt whose lease ran out: it may have charged, so it is
		// finished first (asking the provider, never charging), then the
		// lease is free.
		if err := s.RecoverTransactionOf(ctx, id, lease.TransactionID); err != nil {
			// The acquirer cannot tell yet what became of the earlier
			// attempt: the request stays held, nothing is charged.
			s.Log.Warn("an earlier attempt's outcome is not known yet; the request stays held", "payment_request_id", id,
				"transaction_id", lease.TransactionID, "error", err.Error())
			e := errkind.UnavailableErr("An earlier payment attempt on this request is still being confirmed with the payment provider; nothing more was charged. Try again later.")
			e.RetryAfter = RecoverBackoffBase
			return Result{}, e
		}
		req, err = s.leases.LeasePaymentRequest(ctx, s.lease(id, m.ID, txID, a, now))
		if errkind.Is(err, errkind.Conflict) {
			return Result{}, s.stateProblem(ctx, id)
		}
		if err != nil {
			return Result{}, err
		}
		return s.run(ctx, m, req, txID, a, det)
	}
	return Result{}, busy(id, time.Second)
}

// SupersedeGrace is how long a 3-D Secure challenge stays the request's
// only attempt: after it, a new attempt by the payer (cardholder present)
// supersedes the challenge. A tenth of the challenge window (1 minute by
// default): long enough for a payer still at the challenge page, short
// enough that one who left it can pay again.
func (s *Service) SupersedeGrace() time.Duration { return s.ChallengeWindow / 10 }

// supersedeChallenge closes attempt holder when it is a 3-D Secure
// challenge older than SupersedeGrace and the provider can close it: the
// provider settles the challenge (declined 013, unless the payer answered
// it meanwhile) and Recover books that outcome, whose final commit releases
// the lease. It reports whether the holder is now final, else how long
// until it can be superseded (0: it cannot).
func (s *Service) supersedeChallenge(ctx context.Context, holder int64, a Attempt, now time.Time) (bool, time.Duration, error) {
	if !a.CardholderPresent || holder == 0 || !s.anyConnector(canCloseChallenge) {
		return false, 0, nil
	}
	tx, err := s.txs.Transaction(ctx, holder)
	if errkind.Is(err, errkind.NotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	if tx.Status != payment.TxPending || tx.ThreeDS != payment.ThreeDSChallenge {
		return false, 0, nil
	}
	if left := tx.CreatedAt.Add(s.SupersedeGrace()).Sub(now); left > 0 {
		return false, left, nil
	}
	p := s.ProviderOf(ctx, tx) // the challenge is the charging connector's
	ab, ok := p.(provider.ChallengeAbandoner)
	pc, closer := p.(provider.PendingCloser)
	if !ok && !closer {
		return false, 0, nil
	}
	if !ok {
		// An acquirer's challenge (Stripe): closed there, then booked.
		if closed, err := s.supersedeAtAcquirer(ctx, pc, tx); err != nil || !closed {
			return false, 0, err
		}
		s.Log.Info("3-D Secure challenge superseded by a new attempt", "transaction_id", tx.ID, "payment_request_id", tx.PaymentRequestID)
		return true, 0, nil
	}
	if _, err := ab.AbandonChallenge(ctx, tx.Reference); err != nil {
		if errors.Is(err, provider.ErrUnknownChallenge) {
			return false, 0, nil
		}
		return false, 0, fmt.Errorf("abandon challenge of transaction %d: %w", tx.ID, err)
	}
	if err := s.Recover(ctx, tx); err != nil {
		return false, 0, err
	}
	s.Log.Info("3-D Secure challenge superseded by a new attempt", "transaction_id", tx.ID, "payment_request_id", tx.PaymentRequestID)
	return true, 0, nil
}

// busy is the 409 of a request another attempt holds, with the real wait.
func busy(id int64, wait time.Duration) *errkind.Error {
	e := errkind.ConflictErr(fmt.Sprintf("Another payment attempt on payment request %d is in progress.", id), "")
	e.RetryAfter = max(wait, time.Second) // the edge's Retry-After: whole seconds, at least 1
	return e
}

// stateProblem is the 409 of a request that changed under a takeover.
func (s *Service) stateProblem(ctx context.Context, id int64) error {
	req, lease, err := s.leases.PaymentRequestLease(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case req.Status == payment.RequestPaid:
		return errkind.ConflictErr(fmt.Sprintf("Payment request %d is already paid.", id), "")
	case req.Status == payment.RequestCancelled:
		return errkind.ConflictErr(fmt.Sprintf("Payment request %d is cancelled.", id), codes.TransactionCancelled)
	}
	return busy(id, time.UnixMilli(lease.Until).Sub(s.Now()))
}

// NewTransactionNumber returns a public transaction number: "TX" and 16
// base32 characters of 80 random bits, unrelated to the internal id.
func NewTransactionNumber() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "TX" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

// run writes the attempt's transaction ahead of any charge, checks limits,
// charges and records the outcome.
func (s *Service) run(ctx context.Context, m *merchant.Merchant, req *payment.Request, txID int64, a Attempt, det *card.Details) (Result, error) {
	if err := s.routeAttempt(ctx, m, &a, det, req.Amount, req.Unit, payment.ChargeReference(txID)); err != nil {
		s.giveUp(req.ID, txID) // the lease is all this attempt wrote
		return Result{}, err
	}
	return s.attempt(ctx, m, req, s.newTransaction(m, req, txID, a, det), a, det, false)
}

// newTransaction is the write-ahead record of attempt a on req: waiting,
// with its provider reference and when the reconciler may step in.
func (s *Service) newTransaction(m *merchant.Merchant, req *payment.Request, txID int64, a Attempt, det *card.Details) *payment.Transaction {
	now := s.Now()
	tx := &payment.Transaction{
		ID: txID, Number: NewTransactionNumber(), PaymentRequestID: req.ID, MerchantID: m.ID,
		Status: payment.TxWaiting, Method: string(a.Method), Selector: a.Selector, Channel: a.Channel, Amount: req.Amount, Unit: req.Unit,
		UPIID: a.UPIID, CreatedAt: now.UTC(), UpdatedAt: now.UTC(), Message: provider.Message(provider.Waiting, ""),
		Connector: a.connector,
		Reference: payment.ChargeReference(txID), RecoverAfter: now.Add(s.SyncLease),
	}
	if tx.Connector == "" {
		tx.Connector = s.Connectors.Default()
	}
	if a.Method != provider.MethodUPI {
		tx.UPIID = ""
	}
	if det != nil {
		masked := det.Masked
		tx.Card = &masked
	}
	if a.Payer != nil {
		tx.Payer = &payment.TxPayer{Name: a.Payer.Name, Email: a.Payer.Email, Phone: a.Payer.PhoneNumber, Country: a.Payer.Country}
	}
	return tx
}

// attempt checks limits, writes tx ahead of the charge (unless written:
// stored together with its request, which needs no limit counters),
// charges and records the outcome.
func (s *Service) attempt(ctx context.Context, m *merchant.Merchant, req *payment.Request, tx *payment.Transaction, a Attempt, det *card.Details, written bool) (Result, error) {
	if !written {
		// A request stored before the acquirer's rules applied to it: the
		// lease is all this attempt wrote, and it is released.
		if err := s.checkAttempt(a, req.Amount, req.Unit); err != nil {
			s.giveUp(req.ID, tx.ID)
			return Result{}, err
		}
	}
	now := s.Now()
	country := ""
	if a.Payer != nil {
		country = a.Payer.Country
	}
	limitCode := StaticLimitCode(m.Limits, req.Amount, req.Unit, country)
	if caps := Caps(m.Limits); limitCode == "" && caps.Any() && !written {
		w := payment.WindowAt(m.ID, req.Unit, now)
		code, err := s.reserve(ctx, w, req.Amount, caps)
		if err != nil {
			s.giveUp(req.ID, tx.ID)
			return Result{}, err
		}
		limitCode = code
		if code == "" {
			tx.Limits = payment.NewLimitHold(w.Month, w.Day, w.Unit, req.Amount)
		}
	}
	if !written {
		if err := s.writeAhead(ctx, req, tx); err != nil {
			switch stored, rerr := s.wroteAhead(ctx, req, tx); {
			case rerr == nil && stored:
				// Applied, only its answer lost: the attempt goes on as written.
				s.Log.Warn("write-ahead answered an error but was stored; the attempt goes on", "transaction_id", tx.ID, "error", err.Error())
			case rerr == nil:
				if tx.Limits != nil {
					tx.Status = payment.TxDeclined
					s.release(ctx, tx)
				}
				s.giveUp(req.ID, tx.ID)
				return Result{}, err
			default:
				// Unknown: a transaction stored after all is closed by the
				// reconciler, which gives its limits back then; given back
				// now too, they would be twice.
				s.Log.Error("write-ahead failed and could not be read back; limits stay held", "transaction_id", tx.ID,
					"error", err.Error(), "read_error", rerr.Error())
				s.giveUp(req.ID, tx.ID)
				return Result{}, err
			}
		}
	}
	crashpoint.Hit(crashpoint.AfterTxWrite)
	if limitCode != "" {
		return s.record(ctx, req, tx, provider.Final(provider.Declined, limitCode, ""), a)
	}
	return s.charge(ctx, req, tx, a, det)
}

// writeAhead stores the waiting transaction. A transaction already stored
// under its id for this request and reference is this attempt's own write
// (an earlier try whose answer was lost): it is used as it is. On a real id
// collision it draws a new id and moves the lease to it: a transaction is
// never shared.
func (s *Service) writeAhead(ctx context.Context, req *payment.Request, tx *payment.Transaction) error {
	for try := 0; ; try++ {
		err := s.txs.CreateTransaction(ctx, tx)
		if !errkind.Is(err, errkind.Exists) {
			return err
		}
		held, rerr := s.txs.Transaction(ctx, tx.ID)
		if rerr != nil {
			return fmt.Errorf("read transaction %d after its write found it: %w", tx.ID, rerr)
		}
		if ownWriteAhead(req, tx, held) {
			*tx = *held
			return nil
		}
		if try == 3 {
			return fmt.Errorf("write transaction of payment request %d: %w", req.ID, err)
		}
		old := tx.ID
		tx.ID = ids.New(s.Now())
		tx.Reference = payment.ChargeReference(tx.ID)
		s.Log.Warn("transaction id collision; drawing another", "transaction_id", old)
		if err := s.leases.ReleaseLease(ctx, req.ID, old); err != nil {
			return err
		}
		now := s.Now()
		if _, err := s.leases.LeasePaymentRequest(ctx, payment.Lease{RequestID: req.ID, MerchantID: req.MerchantID,
			TransactionID: tx.ID, Now: now, Until: now.Add(s.SyncLease)}); err != nil {
			return err
		}
	}
}

// ownWriteAhead: held is the waiting transaction tx's write-ahead stored
// for req (not another attempt's under a colliding id).
func ownWriteAhead(req *payment.Request, tx, held *payment.Transaction) bool {
	return held.PaymentRequestID == req.ID && held.Reference == tx.Reference && held.Status == payment.TxWaiting
}

// wroteAhead reads back the transaction a failed write-ahead may have
// stored anyway: DynamoDB may apply a write whose every answer the SDK lost
// (its retries spent, a timeout). true: it is stored, as tx now; false: it
// is not; an error: nobody knows.
func (s *Service) wroteAhead(ctx context.Context, req *payment.Request, tx *payment.Transaction) (bool, error) {
	// The write may have failed on the caller's deadline: the read gets its
	// own short budget.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	held, err := s.txs.Transaction(ctx, tx.ID)
	switch {
	case errkind.Is(err, errkind.NotFound):
		return false, nil
	case err != nil:
		return false, err
	case !ownWriteAhead(req, tx, held):
		return false, nil
	}
	*tx = *held
	return true, nil
}

// charge asks the provider with the transaction's reference and records the
// outcome. When the provider gives no answer the outcome is unknown: the
// reference is looked up, and if that fails too the transaction stays
// waiting for the reconciler (the payer gets 503 and may retry with the same
// Idempotency-Key); it is never guessed. An acquirer that refused the
// charge unprocessed (rate limited) is not an unknown outcome: notProcessed.
func (s *Service) charge(ctx context.Context, req *payment.Request, tx *payment.Transaction, a Attempt, det *card.Details) (Result, error) {
	email, holder := "", ""
	if a.Payer != nil {
		email, holder = a.Payer.Email, a.Payer.Name
	}
	if a.Card != nil && strings.TrimSpace(a.Card.Holder) != "" {
		holder = a.Card.Holder
	}
	out, err := s.ProviderOf(ctx, tx).Charge(ctx, provider.ChargeRequest{
		Reference: tx.Reference, TransactionID: tx.ID, PaymentRequestID: req.ID, Amount: req.Amount, Unit: req.Unit,
		Method: a.Method, Selector: a.Selector, Card: det, HolderName: strings.TrimSpace(holder), CVV: cvvOf(a), WalletToken: a.WalletToken, UPIID: a.UPIID,
		CardholderPresent: a.CardholderPresent, Email: email, ReturnURL: a.ReturnTo, AttemptStart: tx.CreatedAt,
	})
	conn := s.ConnectorOf(tx)
	if errors.Is(err, provider.ErrNotProcessed) {
		s.Breaker.NotProcessed(s.breakerKey(tx.MerchantID, conn), s.Now())
		next := s.nextConnector(a, tx.MerchantID, conn, req.Amount, req.Unit)
		if next == "" {
			return Result{}, s.notProcessed(ctx, req, tx, err)
		}
		return s.chargeNext(ctx, req, tx, a, det, next)
	}
	if err == nil {
		s.Breaker.Processed(s.breakerKey(tx.MerchantID, conn))
	} else {
		s.Log.Error("provider charge failed; looking the reference up", "transaction_id", tx.ID, "error", err.Error())
		var never bool
		out, never, err = s.lookupOutcome(ctx, tx)
		if err != nil {
			s.Log.Error("charge outcome unknown; the reconciler will resolve it", "transaction_id", tx.ID, "error", err.Error())
			return Result{}, errkind.UnavailableErr("The payment provider did not answer. Retry with the same Idempotency-Key; you will not be charged twice.")
		}
		if never {
			// The connector never charged the reference and never will
			// (its lookup closed it): as good as not processed.
			s.Breaker.NotProcessed(s.breakerKey(tx.MerchantID, conn), s.Now())
			if next := s.nextConnector(a, tx.MerchantID, conn, req.Amount, req.Unit); next != "" {
				return s.chargeNext(ctx, req, tx, a, det, next)
			}
		}
	}
	crashpoint.Hit(crashpoint.AfterCharge)
	return s.record(ctx, req, tx, out, a)
}

// notProcessed ends an attempt the acquirer refused before processing it
// (rate limited within its whole retry budget): nothing was charged and the
// reference was never used, so this is neither an unknown outcome (no
// lookup: it would be one more request into the exhausted budget) nor a
// decline (no declined transaction, no notification). The write-ahead
// transaction is deleted and the lease released in one write, the limit
// counters it held are given back, and the payer gets 503 with Retry-After:
// the request is payable again at once. If the discard cannot be written
// the attempt stays waiting and the reconciler resolves it as usual.
func (s *Service) notProcessed(ctx context.Context, req *payment.Request, tx *payment.Transaction, cause error) error {
	s.Log.Warn("acquirer rate limited the charge; nothing charged, attempt given back", "transaction_id", tx.ID,
		"payment_request_id", req.ID, "error", cause.Error())
	// The caller's deadline may be what ended the retries: the discard gets
	// its own short budget.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := s.commits.DiscardAttempt(ctx, req.ID, tx.ID); err != nil {
		s.Log.Error("discarding the unprocessed attempt failed; the reconciler will resolve it", "transaction_id", tx.ID, "error", err.Error())
	} else if tx.Limits != nil {
		w := payment.LimitWindow{MerchantID: tx.MerchantID, Month: tx.Limits.Month, Day: tx.Limits.Day, Unit: tx.Limits.Unit}
		if err := s.limits.ReleaseLimits(ctx, w, tx.Limits.Amount); err != nil {
			s.Log.Error("release limit counters failed", "transaction_id", tx.ID, "error", err.Error())
		}
	}
	secs := max(int64((provider.RetryAfterOf(cause)+time.Second-1)/time.Second), 1) // whole seconds, rounded up
	e := errkind.UnavailableErr(fmt.Sprintf("The payment provider is busy and did not process the payment; nothing was charged. Try again in %d seconds.", secs))
	e.RetryAfter = time.Duration(secs) * time.Second
	// Both: the HTTP layer answers the kind, a batch row sees that nothing
	// was processed (errors.Is provider.ErrNotProcessed).
	return fmt.Errorf("%w (%w)", e, cause)
}

// lookup asks the provider what became of tx's charge. A reference it never
// charged is closed there and becomes a decline (001): no money moved.
func (s *Service) lookup(ctx context.Context, tx *payment.Transaction) (provider.Outcome, error) {
	out, _, err := s.lookupOutcome(ctx, tx)
	return out, err
}

// lookupOutcome is lookup, also telling whether the provider never charged
// the reference (never: the outcome is then that decline).
func (s *Service) lookupOutcome(ctx context.Context, tx *payment.Transaction) (out provider.Outcome, never bool, err error) {
	p := s.ProviderOf(ctx, tx)
	if cl, ok := p.(provider.ChargeLooker); ok {
		// Everything stored helps: the acquirer's id (read directly) and
		// when the attempt began (where a list starts).
		out, err = cl.LookupCharge(ctx, provider.LookupQuery{Reference: tx.Reference, ProviderRef: tx.ProviderRef, Since: tx.CreatedAt})
	} else {
		out, err = p.Lookup(ctx, tx.Reference)
	}
	if errors.Is(err, provider.ErrUnknownReference) {
		return provider.Final(provider.Declined, codes.BankSystemError, ""), true, nil
	}
	if err != nil {
		return out, false, err
	}
	// The provider found the charge (by the reference, through a search
	// anyone with access to the acquirer account could feed): it must be
	// this transaction's.
	return out, false, s.bind(tx, out.ProviderRef, out.Facts, false, "lookup")
}

// record applies a provider outcome to waiting transaction tx of req (as
// the lease returned it).
func (s *Service) record(ctx context.Context, req *payment.Request, tx *payment.Transaction, out provider.Outcome, a Attempt) (Result, error) {
	var (
		st  *payment.Transaction
		err error
	)
	if out.Status == provider.Pending {
		req, st, err = s.markPending(ctx, tx, out)
	} else {
		req, st, err = s.completeSync(ctx, req, tx, out)
	}
	if err != nil {
		return Result{}, err
	}
	return resultOf(req, st, s.nextAction(st, a.BaseURL, a.ReturnTo)), nil
}

// resultOf is the response of an attempt from its stored transaction and
// the request's current state.
func (s *Service) resultOf(ctx context.Context, tx *payment.Transaction, a Attempt) (Result, error) {
	req, err := s.requests.PaymentRequest(ctx, tx.PaymentRequestID)
	if err != nil {
		return Result{}, err
	}
	return resultOf(req, tx, s.nextAction(tx, a.BaseURL, a.ReturnTo)), nil
}

// markPending records a pending outcome: the transaction first (so its
// callback finds it), then the request's lease is extended to the attempt's
// window. Both writes are guarded, so repeating them is harmless.
func (s *Service) markPending(ctx context.Context, tx *payment.Transaction, out provider.Outcome) (*payment.Request, *payment.Transaction, error) {
	now := s.Now()
	window := s.ChallengeWindow
	switch {
	case out.Async != nil:
		window = out.Async.After
	case out.Window > 0:
		window = out.Window
	}
	p := payment.Pending{TransactionID: tx.ID, Message: out.Message, ProviderRef: out.ProviderRef,
		PendingUntil: now.Add(window), Now: now.UTC()}
	p.RecoverAfter = p.PendingUntil.Add(s.PendingGrace)
	if p.Message == "" {
		p.Message = provider.Message(provider.Pending, "")
	}
	if out.NextAction != nil {
		p.NextAction = &payment.TxNextAction{Type: ActionTypeOf(tx.Method, out.NextAction.Type), QRPayload: out.NextAction.QRPayload, Reference: out.NextAction.Reference}
		if out.NextAction.Type == provider.ActionThreeDSRedirect {
			p.ThreeDS = payment.ThreeDSChallenge
			p.NextAction.Reference = ThreeDSID(tx.ID)
		}
	}
	st, err := s.txs.MarkPending(ctx, p)
	if errkind.Is(err, errkind.Conflict) && st.Status != payment.TxPending {
		// Settled meanwhile (a fast callback, or a recovery).
		req, err := s.requests.PaymentRequest(ctx, st.PaymentRequestID)
		return req, st, err
	}
	if err != nil && !errkind.Is(err, errkind.Conflict) {
		return nil, nil, err
	}
	req, err := s.ensurePendingCommit(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	if req.TransactionID != st.ID || req.Status != payment.RequestUnpaid {
		// The request stopped waiting for this attempt (cancelled): the
		// attempt ends here; a charge that completes later is voided.
		return s.complete(ctx, st, provider.Final(provider.Declined, codes.TransactionCancelled, ""), "")
	}
	if out.Async != nil || p.ThreeDS != "" {
		s.schedule(ctx, st, out, now)
	}
	return req, st, nil
}

// ActionTypeOf is the nextAction type an attempt of method shows for an
// acquirer's action of type t: one contract per operation, whatever the
// acquirer's method behind it. A QR attempt always answers "qr" with its
// payload (an INR QR goes through UPI at Stripe, whose own step is a UPI
// collect with a QR), and UPI's own operation keeps "upi_collect".
func ActionTypeOf(method, t string) string {
	switch {
	case method == string(provider.MethodQR) && t == provider.ActionUPICollect:
		return provider.ActionQR
	case method == string(provider.MethodUPI) && t == provider.ActionQR:
		return provider.ActionUPICollect
	}
	return t
}

func cvvOf(a Attempt) string {
	if a.Card == nil {
		return ""
	}
	return a.Card.CVV
}

// giveUp releases the lease of an attempt that failed before charging, so
// the payer can retry at once (best effort: recovery releases it otherwise).
func (s *Service) giveUp(requestID, txID int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.leases.ReleaseLease(ctx, requestID, txID); err != nil && !errkind.Is(err, errkind.Conflict) {
		s.Log.Warn("release attempt lease failed", "payment_request_id", requestID, "error", err.Error())
	}
}

// schedule queues the sandbox's asynchronous side of a pending attempt: its
// result (UPI, QR) or the expiry of an unanswered 3-D Secure challenge.
func (s *Service) schedule(ctx context.Context, tx *payment.Transaction, out provider.Outcome, now time.Time) {
	if !s.Sandbox || s.Queue == nil {
		return
	}
	job := asyncjob.Job{TransactionID: tx.ID, PaymentRequestID: tx.PaymentRequestID, ProviderRef: tx.ProviderRef}
	after := s.ChallengeWindow
	if out.Async != nil {
		after = out.Async.After
		job.Kind, job.Status, job.Code = asyncjob.KindResult, int(out.Async.Status), string(out.Async.Code)
	} else {
		job.Kind = asyncjob.KindThreeDSTimeout
	}
	job.EventID = asyncjob.EventIDFor(job.Kind, tx.ID)
	job.DueAt = now.Add(after).UTC()
	if err := s.Queue.Send(ctx, s.SandboxQueueURL, job, after); err != nil {
		// The reconciler resolves the attempt once its window has passed.
		s.Log.Error("queue sandbox result failed", "transaction_id", tx.ID, "error", err.Error())
	}
}

// void returns the money of a charge that cannot pay its request.
func (s *Service) void(ctx context.Context, tx *payment.Transaction) error {
	_, err := s.ProviderOf(ctx, tx).Refund(ctx, provider.RefundRequest{RefundID: VoidPrefix + tx.Reference, TransactionID: tx.ID,
		ChargeReference: tx.Reference, Void: true,
		ProviderRef: tx.ProviderRef, Amount: tx.Amount, Unit: tx.Unit, Reason: "payment request no longer payable"})
	if err != nil {
		return fmt.Errorf("void charge of transaction %d: %w", tx.ID, err)
	}
	return nil
}

// release gives back the limit counters of a declined transaction.
func (s *Service) release(ctx context.Context, tx *payment.Transaction) {
	if tx.Limits == nil || tx.Status != payment.TxDeclined {
		return
	}
	w := payment.LimitWindow{MerchantID: tx.MerchantID, Month: tx.Limits.Month, Day: tx.Limits.Day, Unit: tx.Limits.Unit}
	if err := s.limits.ReleaseLimits(ctx, w, tx.Limits.Amount); err != nil {
		s.Log.Error("release limit counters failed", "transaction_id", tx.ID, "error", err.Error())
	}
}

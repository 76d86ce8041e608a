package batchproc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/merchant"
)

// slowClaims counts the rows claimed and the claims released, each release
// taking a slow table's time (honouring its context, as the SDK does).
type slowClaims struct {
	batchproc.Store
	delay             time.Duration
	claimed, released atomic.Int32
}

func (s *slowClaims) ClaimBatchRows(ctx context.Context, rows []*batch.RowRecord, now time.Time) ([]int, error) {
	held, err := s.Store.ClaimBatchRows(ctx, rows, now)
	if err == nil {
		s.claimed.Add(int32(len(rows)))
	}
	return held, err
}

func (s *slowClaims) ClaimBatchRow(ctx context.Context, r *batch.RowRecord, now time.Time) (*batch.RowRecord, error) {
	held, err := s.Store.ClaimBatchRow(ctx, r, now)
	if err == nil {
		s.claimed.Add(1)
	}
	return held, err
}

func (s *slowClaims) ReleaseBatchRow(ctx context.Context, r *batch.RowRecord) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	err := s.Store.ReleaseBatchRow(ctx, r)
	if err == nil {
		s.released.Add(1)
	}
	return err
}

// unavailableAcquirer fails every charge before it reaches the acquirer.
type unavailableAcquirer struct{}

var errAcquirerDown = errors.New("acquirer unavailable")

func (unavailableAcquirer) ChargeRow(context.Context, *merchant.Merchant, batch.Row, batchproc.RowRef) (batch.Result, error) {
	return batch.Result{}, errAcquirerDown
}

// A run that fails frees every row it claimed and did not charge, so that
// its retry takes them at once instead of waiting out their leases (two
// minutes each on AWS; for ever on a clock that stands still). On a slow
// table each release gets its own time: one budget for a whole group of
// claims used to run out after the first few (a loaded emulator left a
// claim held and its retry waiting for it).
func TestFastFailedRunReleasesEveryClaim(t *testing.T) {
	t.Parallel()
	wrap := &slowClaims{delay: 200 * time.Millisecond}
	e := newFastEnv(t, func(c *batchproc.Config) { c.Concurrency = 1 },
		func(d *batchproc.Deps) { wrap.Store, d.Store, d.Charger = d.Store, wrap, unavailableAcquirer{} })
	content, _ := bigMixed(t, 24)
	ev := e.upload(t, "down.csv", content)
	if err := e.p.HandleS3(context.Background(), ev); !errors.Is(err, errAcquirerDown) {
		t.Fatalf("the run did not fail on the acquirer: %v", err)
	}
	claimed, released := wrap.claimed.Load(), wrap.released.Load()
	if claimed < 10 {
		t.Fatalf("%d rows claimed, want the file's valid rows", claimed)
	}
	if released != claimed {
		t.Errorf("%d of %d claims released; the rest wait out their lease", released, claimed)
	}
}

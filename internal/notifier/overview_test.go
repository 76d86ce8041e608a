package notifier_test

import (
	"context"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"

	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
)

func problems(t *testing.T, merchantID string) []payment.NotificationProblem {
	t.Helper()
	ps, err := testenv.Stack(t).Store.NotificationProblems(context.Background(), merchantID)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// attemptsOf lists the request's delivery records; a store call that fails
// (a busy emulator timing out) counts as nothing yet, so waitFor polls on.
func attemptsOf(t *testing.T, requestID int64) []payment.DeliveryAttempt {
	d, err := testenv.Stack(t).Store.Deliveries(context.Background(), requestID, time.Now())
	if err != nil {
		t.Logf("list deliveries (polling on): %v", err)
		return nil
	}
	return d
}

func todayEUR(t *testing.T, merchantID string) payment.OverviewBucket {
	t.Helper()
	now := time.Now().UTC()
	bs, err := testenv.Stack(t).Store.Overview(context.Background(), merchantID, now, now, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Unit == "EUR" {
			return b
		}
	}
	return payment.OverviewBucket{}
}

// The notifier adds a settled transaction to its merchant's overview once,
// with its event's first attempt; the same event on the queue again adds
// nothing. A failing delivery is listed for the dashboard until a retry
// delivers it.
func TestSettledCountedOnceAndFailingNotificationListedUntilDelivered(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 500, 500, 200)
	ev := settle(t, m, rc.srv.URL, false)
	waitFor(t, "the first attempt", 30*time.Second, func() bool { return len(attemptsOf(t, ev.RequestID)) >= 1 })
	if ps := problems(t, m.ID); len(ps) != 1 || ps[0].State != payment.NotifyFailing || ps[0].EventID != ev.EventID || ps[0].RequestID != ev.RequestID {
		t.Errorf("after a failed first attempt: %+v", ps)
	}
	if b := todayEUR(t, m.ID); b.Approved != 1 || b.Volume.String() != "10.5" || b.Methods["wallet"].Count != 1 {
		t.Errorf("today's EUR bucket: %+v", b)
	}
	waitFor(t, "delivery on the third attempt", 30*time.Second, func() bool {
		d := attemptsOf(t, ev.RequestID)
		return len(d) == 3 && d[2].Outcome == "delivered"
	})
	if ps := problems(t, m.ID); len(ps) != 0 {
		t.Errorf("still listed after delivery: %+v", ps)
	}
	// The same first event again (an SQS redelivery): delivered again, not counted again.
	if err := queue.New(sqsClient(t)).Send(context.Background(), testenv.Stack(t).Info.Queues["NotificationsQueue"], ev, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redelivered event", 30*time.Second, func() bool { return len(attemptsOf(t, ev.RequestID)) == 4 })
	if b := todayEUR(t, m.ID); b.Approved != 1 || b.Volume.String() != "10.5" {
		t.Errorf("after the redelivery: %+v", b)
	}
}

// An exhausted notification is listed as in the DLQ; redriven and
// delivered, it leaves the list.
func TestDeadLetteredNotificationListedUntilRedriven(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 503)
	ev := settle(t, m, rc.srv.URL, false)
	waitFor(t, "dead-lettering", 30*time.Second, func() bool {
		d := attemptsOf(t, ev.RequestID)
		return len(d) == 3 && d[2].Outcome == "dead-lettered"
	})
	if ps := problems(t, m.ID); len(ps) != 1 || ps[0].State != payment.NotifyDLQ {
		t.Errorf("after dead-lettering: %+v", ps)
	}
	rc.setScript(200)
	info := testenv.Stack(t).Info
	if moved, _, err := notifier.Redrive(context.Background(), queue.New(sqsClient(t)), info.Queues["NotificationsDLQ"], info.Queues["NotificationsQueue"]); err != nil || moved < 1 {
		t.Fatalf("redrive moved %d: %v", moved, err)
	}
	waitFor(t, "delivery after redrive", 15*time.Second, func() bool {
		d := attemptsOf(t, ev.RequestID)
		return len(d) == 4 && d[3].Outcome == "delivered"
	})
	if ps := problems(t, m.ID); len(ps) != 0 {
		t.Errorf("still listed after the redriven delivery: %+v", ps)
	}
}

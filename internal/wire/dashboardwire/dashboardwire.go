// Package dashboardwire builds DashboardFunction: the merchant dashboard.
// It takes the payments core for refunds (which go to the provider), S3 for
// batch result files, sftpauth for SFTP passwords and SSH keys, and the
// service of merchants' own acquirer accounts (paywire.AccountService, as
// payctl connectors), whose checks reach the acquirers' APIs (in a local
// stack their test doubles: paywire.AccountAPIsFromEnv).
package dashboardwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/webhook"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
	dashweb "github.com/payreq/payreq/web/dashboard"
)

// DashboardLambda is DashboardFunction's Lambda handler.
func DashboardLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.HTTPLambda, error) {
	return lambdahttp.Lambda(Dashboard(ctx, getenv, opts))
}

// Dashboard wires DashboardFunction's router.
func Dashboard(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ http.Handler, err error) {
	defer wire.Annotate(&err, "dashboard")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	svc, err := paywire.Service(b, getenv, "dashboard")
	if err != nil {
		return nil, err
	}
	bucket := getenv("BATCH_BUCKET")
	if bucket == "" || getenv("NOTIFICATIONS_QUEUE_URL") == "" {
		return nil, errors.New("wire dashboard: BATCH_BUCKET and NOTIFICATIONS_QUEUE_URL are required")
	}
	ops := &dashOps{store: b.Store, svc: svc, queue: queue.New(sqs.NewFromConfig(b.AWS)), queueURL: getenv("NOTIFICATIONS_QUEUE_URL"),
		objects: s3store.New(s3store.NewClient(b.AWS), bucket)}
	keys, err := lockout.NewKeyer(b.Cfg.SealKey)
	if err != nil {
		return nil, err
	}
	mailer, err := invitationMailer(b.Cfg, b.AWS, getenv)
	if err != nil {
		return nil, err
	}
	// Secure cookies need https; only a local stack on plain http goes without.
	insecure := b.Cfg.Local && (b.Cfg.PublicBaseURL == "" || b.Cfg.PublicBaseURL[:5] == "http:")
	return dashboard.New(dashboard.Deps{
		Store: b.Store, Ops: ops, Sealer: b.Sealer, Overview: dashOverview{b.Store}, AttemptKeys: keys,
		Files:            dashweb.Files,
		Log:              b.Logger("dashboard"),
		InsecureCookies:  insecure,
		PublicBaseURL:    b.Cfg.PublicBaseURL,
		Mailer:           mailer,
		SFTPAddress:      getenv("SFTP_ADDRESS"),
		Connectors:       paywire.AccountService(b.Store, b.Sealer, paywire.AccountAPIsFromEnv(getenv, b.Cfg.Local)),
		NewWebhookSecret: webhook.NewWebhookSecret,
		HashPassword:     sftpauth.HashPassword,
		CheckPassword:    sftpauth.CheckPassword,
	})
}

// dashOps are the dashboard's operations beyond its tables.
type dashOps struct {
	store    *dynamo.Store
	svc      *paycore.Service
	queue    *queue.Client
	queueURL string
	objects  *s3store.Store
}

func (o *dashOps) Deliveries(ctx context.Context, requestID int64) ([]dashboard.Delivery, error) {
	d, err := o.store.Deliveries(ctx, requestID, time.Now())
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Delivery, len(d))
	for i, a := range d {
		out[i] = dashboard.Delivery{EventID: a.EventID, Attempt: a.Attempt, At: a.At, URL: a.URL, StatusCode: a.StatusCode,
			Error: a.Error, Outcome: a.Outcome, NextAt: a.NextAt}
	}
	return out, nil
}

// Redeliver sends the request's latest settled event again, as payctl
// deliveries redeliver does: same webhook-id, fresh retry schedule.
func (o *dashOps) Redeliver(ctx context.Context, r *payment.Request) (string, error) {
	return notifier.Redeliver(ctx, o.queue, o.queueURL, r, time.Now())
}

func (o *dashOps) Refund(ctx context.Context, m *merchant.Merchant, txID int64) (string, error) {
	v, err := o.svc.Refund(ctx, m, txID)
	if err != nil {
		return "", err
	}
	return v.Status, nil
}

func (o *dashOps) Batches(ctx context.Context, merchantID string) ([]dashboard.Batch, error) {
	jobs, err := o.store.BatchJobs(ctx, merchantID, "")
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Batch, 0, len(jobs))
	for _, j := range jobs {
		b := dashboard.Batch{File: j.File, State: j.State, Rows: int(j.Counts.Rows), Approved: int(j.Counts.Approved),
			Declined: int(j.Counts.Declined), Pending: int(j.Counts.Pending), Rejected: int(j.Counts.Rejected),
			Duplicate: int(j.Counts.Duplicate), UpdatedAt: j.UpdatedAt, ReceivedAt: j.CreatedAt}
		if j.State == batch.JobDone && j.ResultKey != "" {
			b.ResultKey = path.Base(j.ResultKey)
		}
		if j.State != batch.JobHashing { // while hashing, Lines is still counting
			b.LinesTotal = j.Lines
			b.LinesDone = min(int64(max(j.NextLine-1, 0)), j.Lines)
			if j.State == batch.JobDone {
				b.LinesDone = j.Lines
			}
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b dashboard.Batch) int { return b.ReceivedAt.Compare(a.ReceivedAt) })
	return out, nil
}

// BatchResult opens a result file of the merchant's own finished jobs only.
func (o *dashOps) BatchResult(ctx context.Context, merchantID, file string) (io.ReadCloser, error) {
	jobs, err := o.store.BatchJobs(ctx, merchantID, "")
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.State == batch.JobDone && path.Base(j.ResultKey) == file {
			return o.objects.Get(ctx, batchproc.ResultsPrefix+merchantID+"/"+file)
		}
	}
	return nil, errkind.NotFoundErr("not found")
}

func (o *dashOps) SFTP(ctx context.Context, merchantID string) (bool, []string, error) {
	u, err := o.store.SFTPUserRecord(ctx, dynamo.SFTPUsername(merchantID))
	if errkind.Is(err, errkind.NotFound) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if u.MerchantID != merchantID {
		return false, nil, nil
	}
	return u.PasswordHash != "", u.PublicKeys, nil
}

func (o *dashOps) SetSFTPPassword(ctx context.Context, merchantID, pw string) error {
	hash, err := sftpauth.HashPassword(pw)
	if err != nil {
		return err
	}
	return o.store.SetSFTPPassword(ctx, merchantID, dynamo.SFTPUsername(merchantID), hash, time.Now())
}

func (o *dashOps) AddSFTPKey(ctx context.Context, merchantID, key string) error {
	line, err := sftpauth.NormalizePublicKey([]byte(key))
	if err != nil {
		return dashboard.BadInput("The SSH key was refused: " + err.Error() + ".")
	}
	err = o.store.AddSFTPKey(ctx, merchantID, dynamo.SFTPUsername(merchantID), line, time.Now())
	switch {
	case errkind.Is(err, errkind.Exists):
		return dashboard.BadInput("This key is already registered.")
	case errkind.Is(err, errkind.Conflict):
		return dashboard.BadInput(fmt.Sprintf("At most %d keys can be registered.", dynamo.MaxSFTPKeys))
	}
	return err
}

func (o *dashOps) RemoveSFTPKey(ctx context.Context, merchantID, key string) error {
	err := o.store.RemoveSFTPKey(ctx, merchantID, dynamo.SFTPUsername(merchantID), key, time.Now())
	if errkind.Is(err, errkind.NotFound) {
		return dashboard.BadInput("This key is not registered.")
	}
	return err
}

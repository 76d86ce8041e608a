package devstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"gopkg.in/yaml.v3"

	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/devstack/sftpd"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/sftpauth"
)

// DefaultSFTPPort is the local SFTP server's port of `make dev`.
const DefaultSFTPPort = 2222

// TypeTransferServer is the template's SFTP server.
const TypeTransferServer = "AWS::Transfer::Server"

// SFTPSetup is what the template says about the SFTP server: its identity
// provider function, and the function (with its bucket) that S3 invokes for
// uploads.
type SFTPSetup struct {
	AuthFunctionID   string // Function of the AWS::Transfer::Server
	UploadFunctionID string // the function with an S3 event on the bucket
	Bucket           string // physical name of that bucket
	Timeout          time.Duration
}

// SFTPSetup reads the SFTP server, its identity provider and the
// S3-triggered function from the template. ok is false when the template
// declares no SFTP server.
func (r *Resources) SFTPSetup() (setup SFTPSetup, ok bool, err error) {
	servers := r.Template.OfType(TypeTransferServer)
	if len(servers) == 0 {
		return setup, false, nil
	}
	fn := cfn.Path(servers[0].Properties, "IdentityProviderDetails", "Function")
	id, _, isGetAtt := cfn.GetAttTarget(fn)
	if !isGetAtt {
		return setup, false, fmt.Errorf("%s: IdentityProviderDetails.Function must be !GetAtt <Function>.Arn", servers[0].LogicalID)
	}
	setup.AuthFunctionID = id
	for _, f := range r.Functions {
		for _, ev := range f.Events {
			if ev.Type != "S3" {
				continue
			}
			bucketID := refTarget(cfn.Path(ev.Properties, "Bucket"))
			bucket, ok := r.Buckets[bucketID]
			if !ok {
				return setup, false, fmt.Errorf("function %s event %s: Bucket must be !Ref of a bucket of the template", f.LogicalID, ev.Name)
			}
			setup.UploadFunctionID, setup.Bucket = f.LogicalID, bucket
			setup.Timeout = r.functionTimeout(f.LogicalID)
		}
	}
	if setup.UploadFunctionID == "" {
		return setup, false, fmt.Errorf("the template has an SFTP server but no function with an S3 event")
	}
	return setup, true, nil
}

// functionTimeout is a function's Timeout (its own, else the Globals').
func (r *Resources) functionTimeout(id string) time.Duration {
	for _, n := range []*yaml.Node{cfn.Path(r.Template.Resources[id].Properties, "Timeout"), cfn.Path(r.Template.Globals, "Function", "Timeout")} {
		if n == nil {
			continue
		}
		v := n.Value
		if r.resolver != nil { // a !Ref to a parameter (BatchTimeout)
			if resolved, err := r.resolver.String(n); err == nil {
				v = resolved
			}
		}
		if s, err := strconv.Atoi(v); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return 3 * time.Second // Lambda's default
}

// refTarget returns the logical id of a !Ref node ("" otherwise).
func refTarget(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Tag == "!Ref" {
		return n.Value
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Ref" {
		return n.Content[1].Value
	}
	return ""
}

// localSFTP is the running stand-in for Transfer Family.
type localSFTP struct {
	srv    *sftpd.Server
	served chan error
}

// startSFTP serves SFTP on host:port with the template's identity provider
// and the batch bucket; after each upload it invokes the S3-triggered
// function with a real events.S3Event, as S3 would (the emulator has no
// bucket notifications).
func (s *Stack) startSFTP(ctx context.Context, opts Options, cfg aws.Config, log *slog.Logger) error {
	setup, ok, err := s.Resources.SFTPSetup()
	if err != nil || !ok {
		return err
	}
	host, port := opts.Host, opts.SFTPPort
	if port == 0 && opts.APIPort != 0 {
		port = DefaultSFTPPort
	}
	authHandler, err := s.build(ctx, setup.AuthFunctionID, opts, cfg)
	if err != nil {
		return err
	}
	auth := identityProvider{h: authHandler, functionID: setup.AuthFunctionID, timeout: s.Resources.functionTimeout(setup.AuthFunctionID)}
	handler, err := s.build(ctx, setup.UploadFunctionID, opts, cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.stateDir, "sftp")
	spool := filepath.Join(dir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return err
	}
	log = log.With("component", "sftp")
	srv, err := sftpd.New(sftpd.Config{
		Auth:           auth,
		Store:          sftpObjects{s3store.New(s3store.NewClient(cfg), setup.Bucket)},
		Bucket:         setup.Bucket,
		HostKeyPath:    filepath.Join(dir, "ssh_host_ed25519_key"),
		SpoolDir:       spool,
		Logger:         log,
		ShutdownPeriod: 5 * time.Second,
		OnUpload: func(ctx context.Context, ev sftpd.UploadEvent) {
			InvokeS3(ctx, handler, setup.UploadFunctionID, UploadNotification(ev), setup.Timeout, log)
		},
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		srv.Close()
		return fmt.Errorf("listen for SFTP on %s:%d (is another stack running?): %w", host, port, err)
	}
	s.sftp = &localSFTP{srv: srv, served: make(chan error, 1)}
	s.Info.SFTPAddr = l.Addr().String()
	go func() { s.sftp.served <- srv.Serve(context.Background(), l) }()
	return nil
}

// identityProvider is the SFTP server's authenticator: each login is an
// invocation of the identity provider function with Transfer Family's event.
type identityProvider struct {
	h          lambda.Handler
	functionID string
	timeout    time.Duration
}

func (p identityProvider) Authenticate(ctx context.Context, ev sftpauth.Event) (sftpauth.Response, error) {
	var resp sftpauth.Response
	err := Invoke(ctx, p.h, p.functionID, p.timeout, ev, &resp)
	return resp, err
}

// sftpObjects is the batch bucket as the SFTP server's object store.
type sftpObjects struct{ *s3store.Store }

var _ sftpd.ObjectStore = sftpObjects{}

func (o sftpObjects) List(ctx context.Context, prefix string) ([]sftpd.ObjectInfo, error) {
	objs, err := o.Store.List(ctx, prefix)
	out := make([]sftpd.ObjectInfo, len(objs))
	for i, ob := range objs {
		out[i] = sftpd.ObjectInfo{Key: ob.Key, Size: ob.Size, LastModified: ob.LastModified, ETag: ob.ETag}
	}
	return out, err
}

func (l *localSFTP) close() {
	l.srv.Close()
	<-l.served
}

// UploadNotification is the S3 ObjectCreated:Put event of an SFTP upload,
// shaped as S3 sends it: the key URL-encoded (spaces as "+"), size, ETag
// without quotes, and a sequencer that differs for every upload of a key.
func UploadNotification(ev sftpd.UploadEvent) events.S3Event {
	now := time.Now().UTC()
	key := strings.ReplaceAll(url.QueryEscape(ev.Key), "%2F", "/")
	return events.S3Event{Records: []events.S3EventRecord{{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: Region, EventTime: now, EventName: "ObjectCreated:Put",
		PrincipalID:       events.S3UserIdentity{PrincipalID: "AWS:transfer-local"},
		RequestParameters: events.S3RequestParameters{SourceIPAddress: "127.0.0.1"},
		S3: events.S3Entity{
			SchemaVersion: "1.0", ConfigurationID: "Upload",
			Bucket: events.S3Bucket{Name: ev.Bucket, OwnerIdentity: events.S3UserIdentity{PrincipalID: Account},
				Arn: "arn:aws:s3:::" + ev.Bucket},
			Object: events.S3Object{Key: key, Size: ev.Size, ETag: s3store.CleanETag(ev.ETag),
				Sequencer: fmt.Sprintf("%016X", now.UnixNano())},
		},
	}}}
}

// InvokeS3 does what Lambda does with an asynchronous S3 event: the
// function's Lambda handler gets the event as JSON within the function's
// timeout, and a failed invocation is retried twice (after 1 and 2 s
// locally, 1 and 2 min on AWS).
func InvokeS3(ctx context.Context, h lambda.Handler, functionID string, ev events.S3Event, timeout time.Duration, log *slog.Logger) {
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		err := Invoke(ctx, h, functionID, timeout, ev, nil)
		if err == nil {
			return
		}
		log.Warn("S3-triggered function failed", "attempt", attempt+1, "error", err.Error())
	}
	log.Error("S3 event dropped after 3 attempts (on AWS it goes to the on-failure destination)")
}

// seedSFTPUser gives the seeded merchant its SFTP login: the same user and
// password on every start (they are kept in merchant.json with the key).
func seedSFTPUser(ctx context.Context, store *dynamo.Store, seed *SeedMerchant) error {
	seed.SFTPUser = dynamo.SFTPUsername(seed.ID)
	if seed.SFTPPassword == "" {
		seed.SFTPPassword = NewSFTPPassword()
	}
	hash, err := sftpauth.HashPassword(seed.SFTPPassword)
	if err != nil {
		return err
	}
	if err := store.SetSFTPPassword(ctx, seed.ID, seed.SFTPUser, hash, time.Now()); err != nil {
		return fmt.Errorf("seed SFTP user: %w", err)
	}
	return nil
}

// NewSFTPPassword returns a random password of 24 base62 characters (about
// 143 bits).
func NewSFTPPassword() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}

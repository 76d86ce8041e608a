// Package sftpauthwire builds SftpAuthFunction, the Transfer Family identity
// provider: sftpauth's login decision plus the session policy. It reads
// neither the seal key nor any queue, bucket or provider.
package sftpauthwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/wire"
)

// SFTPAuthenticator is the identity provider: sftpauth's decision plus, for
// an accepted login, a session policy that narrows the user role to the
// merchant's own prefixes.
type SFTPAuthenticator struct {
	*sftpauth.Authenticator
}

// Authenticate answers one Transfer Family login event.
func (a *SFTPAuthenticator) Authenticate(ctx context.Context, ev sftpauth.Event) (sftpauth.Response, error) {
	resp, err := a.Authenticator.Authenticate(ctx, ev)
	if err != nil || !resp.Allowed() {
		return resp, err
	}
	merchantID, err := homeMerchant(resp, a.Bucket)
	if err != nil {
		return sftpauth.Response{}, err
	}
	resp.Policy = SessionPolicy(a.Bucket, merchantID)
	return resp, nil
}

// homeMerchant reads the merchant id back from the granted home.
func homeMerchant(resp sftpauth.Response, bucket string) (string, error) {
	maps, err := resp.Mappings()
	if err != nil {
		return "", err
	}
	for _, m := range maps {
		if m.Entry == sftpauth.IncomingDir {
			if id, ok := strings.CutPrefix(m.Target, "/"+bucket+"/incoming/"); ok && id != "" && !strings.Contains(id, "/") {
				return id, nil
			}
		}
	}
	return "", errors.New("sftpauth: granted home has no incoming directory")
}

// SessionPolicy is the scope-down policy of a merchant's SFTP session: the
// user role allows the whole batch bucket's incoming/ and results/, the
// session only the merchant's own prefixes — upload and read in incoming/,
// read and delete in results/ — and the bucket key's use for them.
func SessionPolicy(bucket, merchantID string) string {
	arn := "arn:aws:s3:::" + bucket
	in, out := path.Join("incoming", merchantID), path.Join("results", merchantID)
	type stmt struct {
		Sid       string         `json:"Sid"`
		Effect    string         `json:"Effect"`
		Action    []string       `json:"Action"`
		Resource  []string       `json:"Resource"`
		Condition map[string]any `json:"Condition,omitempty"`
	}
	doc := struct {
		Version   string `json:"Version"`
		Statement []stmt `json:"Statement"`
	}{Version: "2012-10-17", Statement: []stmt{
		{Sid: "ListOwnDirectories", Effect: "Allow", Action: []string{"s3:ListBucket"}, Resource: []string{arn},
			Condition: map[string]any{"StringLike": map[string]any{"s3:prefix": []string{in, in + "/*", out, out + "/*"}}}},
		{Sid: "UploadAndReadIncoming", Effect: "Allow", Action: []string{"s3:PutObject", "s3:GetObject", "s3:GetObjectVersion"},
			Resource: []string{arn + "/" + in + "/*"}},
		{Sid: "ReadAndDeleteResults", Effect: "Allow", Action: []string{"s3:GetObject", "s3:GetObjectVersion", "s3:DeleteObject", "s3:DeleteObjectVersion"},
			Resource: []string{arn + "/" + out + "/*"}},
		{Sid: "UseBucketKey", Effect: "Allow", Action: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resource: []string{"*"}},
	}}
	b, _ := json.Marshal(doc)
	return string(b)
}

// SFTPAuthLambda is SftpAuthFunction's Lambda handler: Transfer Family's
// identity provider events.
func SFTPAuthLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (func(context.Context, sftpauth.Event) (sftpauth.Response, error), error) {
	a, err := SFTPAuth(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return a.Authenticate, nil
}

// SFTPAuth builds SftpAuthFunction: the Transfer Family identity provider.
func SFTPAuth(ctx context.Context, getenv config.Getenv, opts wire.Options) (*SFTPAuthenticator, error) {
	b, err := wire.Load(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire sftpauth: %w", err)
	}
	bucket, role := getenv("BATCH_BUCKET"), getenv("SFTP_USER_ROLE_ARN")
	if bucket == "" || role == "" {
		return nil, errors.New("wire sftpauth: BATCH_BUCKET and SFTP_USER_ROLE_ARN are required")
	}
	attempts := &lockout.Counting{Store: b.Store}
	return &SFTPAuthenticator{&sftpauth.Authenticator{Users: b.Store, Attempts: attempts, Bucket: bucket, RoleARN: role,
		Logger: b.Logger("sftpauth")}}, nil
}

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/sftpuser"
)

// MinSFTPPasswordLength is the shortest password an operator may set.
const MinSFTPPasswordLength = 12

// sftpView is what `payctl sftp` prints: how to connect, never a stored hash.
type sftpView struct {
	MerchantID        string       `json:"merchantId"`
	User              string       `json:"user"`
	Host              string       `json:"host,omitempty"`
	Port              int          `json:"port,omitempty"`
	Address           string       `json:"address,omitempty"` // sftp://user@host:port
	Configured        bool         `json:"configured"`
	PasswordSet       bool         `json:"passwordSet"`
	PasswordUpdatedAt *time.Time   `json:"passwordUpdatedAt,omitempty"`
	Keys              []sftpKeyRef `json:"keys"`
	Directories       []string     `json:"directories"`

	// Shown once, by set-password when the password was generated.
	Password string `json:"password,omitempty"`
	Notice   string `json:"notice,omitempty"`
}

type sftpKeyRef struct {
	Type        string `json:"type"`
	Fingerprint string `json:"fingerprint"`
	Comment     string `json:"comment,omitempty"`
}

func sftpCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "sftp",
		Short: "Manage a merchant's SFTP login for batch files",
		Long:  "sftp sets up the SFTP login merchants use to upload batch files: a password (only its Argon2id hash is stored) and SSH public keys.",
		Example: `  payctl --local sftp set-password --id mer_...
  payctl --local sftp add-key --id mer_... --key-file ~/.ssh/id_ed25519.pub
  payctl --local sftp show --id mer_...`,
	}
	var id, password, keyFile string
	setPassword := &cobra.Command{
		Use:   "set-password --id ID [--password P]",
		Short: "Set the SFTP password (generated and shown once without --password)",
		Example: `  payctl --local sftp set-password --id mer_...
  payctl --local sftp set-password --id mer_... --password 'correct horse battery staple'`,
		RunE: jsonCommand(func(ctx context.Context) (any, error) { return sftpRun(ctx, *g, "set-password", id, password, keyFile) }),
	}
	setPassword.Flags().StringVar(&id, "id", "", "merchant id")
	setPassword.Flags().StringVar(&password, "password", "", fmt.Sprintf("password to set, at least %d characters (default: generate one)", MinSFTPPasswordLength))
	addKey := &cobra.Command{
		Use:     "add-key --id ID --key-file FILE",
		Short:   "Register an SSH public key (authorized_keys format, e.g. id_ed25519.pub)",
		Example: "  payctl --local sftp add-key --id mer_... --key-file ~/.ssh/id_ed25519.pub",
		RunE:    jsonCommand(func(ctx context.Context) (any, error) { return sftpRun(ctx, *g, "add-key", id, password, keyFile) }),
	}
	addKey.Flags().StringVar(&id, "id", "", "merchant id")
	addKey.Flags().StringVar(&keyFile, "key-file", "", "public key file (authorized_keys format, e.g. ~/.ssh/id_ed25519.pub)")
	show := &cobra.Command{
		Use:     "show --id ID",
		Short:   "Show the SFTP login: address, user, password set, key fingerprints",
		Example: "  payctl --local sftp show --id mer_...",
		RunE:    jsonCommand(func(ctx context.Context) (any, error) { return sftpRun(ctx, *g, "show", id, password, keyFile) }),
	}
	show.Flags().StringVar(&id, "id", "", "merchant id")
	c.AddCommand(setPassword, addKey, show)
	return c
}

func sftpRun(ctx context.Context, g globals, sub, idFlag, passwordFlag, keyFileFlag string) (any, error) {
	id, password, keyFile := &idFlag, &passwordFlag, &keyFileFlag
	if *id == "" {
		return nil, usageError("--id is required")
	}
	if sub == "add-key" && *keyFile == "" {
		return nil, usageError("--key-file is required")
	}
	if sub == "set-password" && *password != "" && len(*password) < MinSFTPPasswordLength {
		return nil, fmt.Errorf("the password must be at least %d characters", MinSFTPPasswordLength)
	}
	var key string
	if sub == "add-key" {
		var err error
		if key, err = readPublicKey(*keyFile); err != nil {
			return nil, err
		}
	}
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	if _, err := load(ctx, e, *id); err != nil {
		return nil, err
	}
	user := dynamo.SFTPUsername(*id)
	now := time.Now()
	var shown, notice string
	switch sub {
	case "set-password":
		pw := *password
		if pw == "" {
			pw = devstack.NewSFTPPassword()
			shown, notice = pw, "The password is shown only now; only its Argon2id hash is stored."
		}
		hash, err := sftpauth.HashPassword(pw)
		if err != nil {
			return nil, err
		}
		if err := e.store.SetSFTPPassword(ctx, *id, user, hash, now); err != nil {
			return nil, err
		}
		// A new password takes back the old one's failures and lock.
		attempts := lockout.Counting{Store: e.store}
		if err := attempts.Clear(ctx, sftpuser.AttemptKey(user)); err != nil {
			return nil, err
		}
	case "add-key":
		err := e.store.AddSFTPKey(ctx, *id, user, key, now)
		if errkind.Is(err, errkind.Exists) {
			notice = "This key was already registered."
		} else if err != nil {
			return nil, err
		}
	}
	if sub != "show" {
		if err := auditPayctl(ctx, e, *id, "sftp.update", "payctl sftp "+sub); err != nil {
			return nil, err
		}
	}
	v, err := showSFTP(ctx, g, e, *id)
	if err != nil {
		return nil, err
	}
	v.Password, v.Notice = shown, notice
	return v, nil
}

// readPublicKey reads one SSH public key in authorized_keys format and
// returns it normalised ("type base64 comment"). A key already registered
// under another comment is the same key: AddSFTPKey compares normalised
// lines, and showSFTP lists fingerprints.
func readPublicKey(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, err := sftpauth.NormalizePublicKey(data) // the dashboard's check too
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return line, nil
}

// showSFTP describes a merchant's SFTP login.
func showSFTP(ctx context.Context, g globals, e *env, merchantID string) (sftpView, error) {
	user := dynamo.SFTPUsername(merchantID)
	v := sftpView{MerchantID: merchantID, User: user, Keys: []sftpKeyRef{}, Directories: []string{sftpauth.IncomingDir, sftpauth.ResultsDir}}
	rec, err := e.store.SFTPUserRecord(ctx, user)
	switch {
	case errkind.Is(err, errkind.NotFound):
	case err != nil:
		return v, err
	case rec.MerchantID != merchantID:
		return v, fmt.Errorf("sftp user %s belongs to another merchant", user)
	default:
		v.Configured = rec.PasswordHash != "" || len(rec.PublicKeys) > 0
		v.PasswordSet, v.PasswordUpdatedAt = rec.PasswordHash != "", rec.PasswordUpdatedAt
		for _, line := range rec.PublicKeys {
			pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
			if err != nil {
				continue
			}
			v.Keys = append(v.Keys, sftpKeyRef{Type: pub.Type(), Fingerprint: ssh.FingerprintSHA256(pub), Comment: comment})
		}
	}
	host, port, err := sftpAddress(ctx, g, e)
	if err != nil {
		return v, err
	}
	v.Host, v.Port = host, port
	if host != "" {
		v.Address = "sftp://" + user + "@" + net.JoinHostPort(host, strconv.Itoa(port))
	}
	return v, nil
}

// sftpAddress is the local stack's SFTP server, or the deployed stack's
// Transfer Family endpoint (output SftpEndpoint, port 22).
func sftpAddress(ctx context.Context, g globals, e *env) (string, int, error) {
	if g.local {
		info, err := devstack.ReadInfo(g.stateDir)
		if err != nil {
			return "", 0, err
		}
		if info.SFTPAddr == "" {
			return "", 0, nil
		}
		host, p, err := net.SplitHostPort(info.SFTPAddr)
		if err != nil {
			return "", 0, err
		}
		port, _ := strconv.Atoi(p)
		return host, port, nil
	}
	out, err := cloudformation.NewFromConfig(e.cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: &g.stack})
	if err != nil {
		return "", 0, fmt.Errorf("describe stack %s: %w", g.stack, err)
	}
	for _, s := range out.Stacks {
		for _, o := range s.Outputs {
			if aws.ToString(o.OutputKey) == "SftpEndpoint" {
				return aws.ToString(o.OutputValue), 22, nil
			}
		}
	}
	return "", 0, nil
}

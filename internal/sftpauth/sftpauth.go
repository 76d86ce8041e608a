// Package sftpauth is the custom identity provider of the merchants' SFTP
// server: AWS Transfer Family invokes it (as a Lambda) for every login, and
// the local SFTP server (internal/devstack/sftpd) calls the very same Authenticator, so
// both environments accept exactly the same credentials and homes.
//
// Password attempts are counted and locked out as the dashboard's sign-ins
// are (internal/lockout: counted before the check, 5 failures lock for 30 s,
// doubling up to an hour), per user name, known or not: an unknown name, a
// locked user and a wrong password get the same denial after the same work
// (one user read, one counter read and, unless locked, one conditional
// write, one Argon2id check). Key logins are not counted: Transfer Family
// checks the key itself, and a key cannot be guessed.
package sftpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpuser"
)

// Event is the request Transfer Family sends to the identity provider.
// Password is empty when the client authenticates with a public key.
type Event struct {
	Username string `json:"username"`
	Password string `json:"password,omitempty"`
	Protocol string `json:"protocol"`
	ServerID string `json:"serverId"`
	SourceIP string `json:"sourceIp"`
}

// String hides the password, so logging an Event never leaks it.
func (e Event) String() string {
	return fmt.Sprintf("sftpauth.Event{username=%q protocol=%s serverId=%s sourceIp=%s}",
		e.Username, e.Protocol, e.ServerID, e.SourceIP)
}

// LogValue implements slog.LogValuer without the password.
func (e Event) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", e.Username), slog.String("protocol", e.Protocol),
		slog.String("serverId", e.ServerID), slog.String("sourceIp", e.SourceIP))
}

// Response is the identity provider's answer. The zero Response (encoded as
// {}) denies the login; HomeDirectoryDetails is a JSON document in a string,
// as Transfer Family requires.
type Response struct {
	Role                 string   `json:"Role,omitempty"`
	Policy               string   `json:"Policy,omitempty"`
	HomeDirectoryType    string   `json:"HomeDirectoryType,omitempty"`
	HomeDirectoryDetails string   `json:"HomeDirectoryDetails,omitempty"`
	PublicKeys           []string `json:"PublicKeys,omitempty"`
}

// Allowed reports whether the response lets the user in.
func (r Response) Allowed() bool { return r.Role != "" }

// Mappings decodes HomeDirectoryDetails.
func (r Response) Mappings() ([]Mapping, error) {
	var m []Mapping
	if err := json.Unmarshal([]byte(r.HomeDirectoryDetails), &m); err != nil {
		return nil, fmt.Errorf("sftpauth: home directory details: %w", err)
	}
	return m, nil
}

// Mapping is one logical directory: what the user sees (Entry) and where it
// lives (Target, "/<bucket>/<key prefix>").
type Mapping struct {
	Entry  string `json:"Entry"`
	Target string `json:"Target"`
}

// Logical directories of every merchant.
const (
	IncomingDir = "/incoming" // uploads: batch files to process
	ResultsDir  = "/results"  // result files written back by the service
)

// HomeMappings is the logical home of a merchant: /incoming and /results,
// each mapped onto the merchant's own prefix, so a merchant can neither see
// nor reach another's files.
func HomeMappings(bucket, merchantID string) []Mapping {
	return []Mapping{
		{Entry: IncomingDir, Target: "/" + bucket + "/incoming/" + merchantID},
		{Entry: ResultsDir, Target: "/" + bucket + "/results/" + merchantID},
	}
}

// Transfer Family's own rule for user names; anything else is not looked up.
var validUsername = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_@.-]{2,99}$`)

// Merchant ids become key prefixes: no separators, no dot segments.
var validMerchantID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Authenticator decides Transfer Family logins for merchants' SFTP users.
type Authenticator struct {
	Users sftpuser.Store
	// Attempts counts password attempts (the store's login attempt
	// counters); required for password logins.
	Attempts *lockout.Counting
	Bucket   string // batch bucket holding incoming/ and results/
	RoleARN  string // role Transfer Family assumes to reach the bucket
	Logger   *slog.Logger
}

// Authenticate answers one login. A password login succeeds when the password
// matches; a key login (empty password) returns the user's public keys and
// Transfer Family checks the key itself. A denied login is the zero Response
// and a nil error; an error means the decision could not be made (store down,
// misconfiguration) and also denies.
func (a *Authenticator) Authenticate(ctx context.Context, ev Event) (Response, error) {
	if a.Bucket == "" || a.RoleARN == "" {
		return Response{}, errors.New("sftpauth: Bucket and RoleARN must be set")
	}
	keyLogin := ev.Password == ""
	if ev.Protocol != "SFTP" {
		// FTP would carry the password in clear text; only SFTP is offered.
		a.fail(ctx, ev, "protocol not allowed")
		return Response{}, nil
	}

	var user sftpuser.User
	var err error
	if validUsername.MatchString(ev.Username) {
		user, err = a.Users.SFTPUser(ctx, ev.Username)
	} else {
		err = errkind.New(errkind.NotFound, "no such user", "")
	}
	switch {
	case errkind.Is(err, errkind.NotFound):
		if !keyLogin {
			// Counted and checked as a known user's password would be.
			_, err := a.checkPassword(ctx, ev, "", false)
			return Response{}, err
		}
		a.fail(ctx, ev, "unknown user")
		return Response{}, nil
	case err != nil:
		return Response{}, fmt.Errorf("sftpauth: look up user: %w", err)
	}
	if !validMerchantID.MatchString(user.MerchantID) {
		return Response{}, fmt.Errorf("sftpauth: user %q has an unusable merchant id", ev.Username)
	}

	resp := Response{Role: a.RoleARN, HomeDirectoryType: "LOGICAL"}
	if keyLogin {
		if len(user.PublicKeys) == 0 {
			a.fail(ctx, ev, "no public key registered")
			return Response{}, nil
		}
		resp.PublicKeys = user.PublicKeys
	} else {
		ok, err := a.checkPassword(ctx, ev, user.PasswordHash, true)
		if err != nil {
			return Response{}, err
		}
		if !ok {
			return Response{}, nil
		}
	}
	details, err := json.Marshal(HomeMappings(a.Bucket, user.MerchantID))
	if err != nil {
		return Response{}, err
	}
	resp.HomeDirectoryDetails = string(details)
	msg := "sftp login accepted"
	if keyLogin {
		msg = "sftp public keys returned for verification"
	}
	a.logger().InfoContext(ctx, msg, "username", ev.Username, "merchantId", user.MerchantID, "sourceIp", ev.SourceIP)
	return resp, nil
}

// checkPassword counts a password attempt on the user name before checking
// it against hash (empty: an unknown (not known) or key-only user, checked
// against dummyHash and refused), and logs a refusal with its reason. A locked
// user's password is not checked (dummyHash instead: the same time) and the
// denial is the same as a wrong password's. An error means the attempt
// could not be counted (too many at once, store down): denied unchecked.
func (a *Authenticator) checkPassword(ctx context.Context, ev Event, hash string, known bool) (bool, error) {
	if a.Attempts == nil {
		return false, errors.New("sftpauth: Attempts must be set for password logins")
	}
	adm, err := a.Attempts.Admit(ctx, sftpuser.AttemptKey(ev.Username))
	if err != nil {
		a.fail(ctx, ev, "attempt not counted")
		return false, fmt.Errorf("sftpauth: count password attempt: %w", err)
	}
	check := hash
	if !adm.Admitted() || check == "" {
		check = dummyHash
	}
	right := CheckPassword(check, ev.Password) && check == hash
	switch {
	case !adm.Admitted():
		a.logger().WarnContext(ctx, "sftp login refused", "username", ev.Username, "sourceIp", ev.SourceIP,
			"serverId", ev.ServerID, "method", "password", "reason", "locked", "lockedUntil", adm.LockedUntil.UTC().Format(time.RFC3339))
		return false, nil
	case !right:
		reason := "wrong password"
		if !known {
			reason = "unknown user"
		}
		a.fail(ctx, ev, reason)
		if lock := lockout.LockFor(adm.Failures); lock > 0 {
			a.logger().WarnContext(ctx, "sftp user locked", "username", ev.Username, "sourceIp", ev.SourceIP,
				"failures", adm.Failures, "lockedFor", lock.String())
		}
		return false, nil
	}
	if err := a.Attempts.Settle(ctx, adm); err != nil {
		return false, fmt.Errorf("sftpauth: settle password attempt: %w", err)
	}
	return true, nil
}

// fail logs a refused login for operators; the client only sees a denial.
func (a *Authenticator) fail(ctx context.Context, ev Event, reason string) {
	a.logger().WarnContext(ctx, "sftp login refused", "username", ev.Username, "sourceIp", ev.SourceIP,
		"serverId", ev.ServerID, "method", method(ev.Password == ""), "reason", reason)
}

func (a *Authenticator) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func method(keyLogin bool) string {
	if keyLogin {
		return "publickey"
	}
	return "password"
}

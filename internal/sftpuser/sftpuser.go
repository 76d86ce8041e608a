// Package sftpuser is a merchant's SFTP login as a domain type: internal/dynamo
// stores it, the identity provider (internal/sftpauth) checks logins against
// it, and neither imports the other for it.
package sftpuser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// AttemptKey names the password attempt counter of a user name
// (internal/lockout), known or not. User names are merchant ids, no
// secret; the hash keeps a name someone typed (a password in the wrong
// field, say) out of the table in clear.
func AttemptKey(username string) string {
	sum := sha256.Sum256([]byte("payreq/sftp-attempts/v1:" + username))
	return "sftp-" + hex.EncodeToString(sum[:])
}

// User is a merchant's SFTP login. PasswordHash is an Argon2id PHC string,
// never the password, and empty for key-only users; PublicKeys are in
// authorized_keys format ("ssh-ed25519 AAAA… comment"). The tags are its
// stored form.
type User struct {
	Username          string     `dynamodbav:"-"`
	MerchantID        string     `dynamodbav:"merchantId"`
	PasswordHash      string     `dynamodbav:"passwordHash,omitempty"`
	PublicKeys        []string   `dynamodbav:"publicKeys,omitempty"`
	PasswordUpdatedAt *time.Time `dynamodbav:"passwordUpdatedAt,omitempty"`
	CreatedAt         time.Time  `dynamodbav:"createdAt"`
	UpdatedAt         time.Time  `dynamodbav:"updatedAt"`
}

// Store finds SFTP users by name (*dynamo.Store); an unknown username is
// a NotFound error (errkind).
type Store interface {
	SFTPUser(ctx context.Context, username string) (User, error)
}

package sftpauth

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// NormalizePublicKey checks an authorized_keys line and returns it in the
// stored form ("type base64 [comment]"): ed25519, ECDSA, or RSA of at least
// 2048 bits; no key options.
func NormalizePublicKey(data []byte) (string, error) {
	pub, comment, options, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return "", errors.New("not an SSH public key in authorized_keys format")
	}
	if len(options) > 0 {
		return "", fmt.Errorf("key options (%s) are not supported", strings.Join(options, ","))
	}
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521:
	case ssh.KeyAlgoRSA:
		ck, ok := pub.(ssh.CryptoPublicKey)
		if k, isRSA := ck.CryptoPublicKey().(*rsa.PublicKey); ok && isRSA && k.N.BitLen() < 2048 {
			return "", errors.New("RSA keys must have at least 2048 bits")
		}
	default:
		return "", fmt.Errorf("key type %s is not accepted (use ed25519, ECDSA or RSA)", pub.Type())
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	comment = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(comment))
	if comment != "" {
		line += " " + comment
	}
	return line, nil
}

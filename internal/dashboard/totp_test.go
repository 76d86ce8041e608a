package dashboard

import (
	"encoding/base32"
	"testing"
	"time"
)

// RFC 6238 appendix B, SHA-1 column (8 digits there; the last 6 here).
func TestTOTPMatchesRFC6238Vectors(t *testing.T) {
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("12345678901234567890"))
	for _, v := range []struct {
		unix int64
		want string
	}{{59, "287082"}, {1111111109, "081804"}, {1111111111, "050471"}, {1234567890, "005924"}, {2000000000, "279037"}} {
		got, err := TOTPCode(secret, TOTPStep(time.Unix(v.unix, 0)))
		if err != nil || got != v.want {
			t.Errorf("T=%d: got %q, %v; want %s", v.unix, got, err, v.want)
		}
	}
	now := time.Unix(1111111111, 0)
	if _, ok := VerifyTOTP(secret, "050471", now.Add(30*time.Second)); !ok {
		t.Error("a code of the previous step is refused")
	}
	if _, ok := VerifyTOTP(secret, "050471", now.Add(90*time.Second)); ok {
		t.Error("a code three steps old is accepted")
	}
}

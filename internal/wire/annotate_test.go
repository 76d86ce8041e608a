package wire

import (
	"errors"
	"testing"
)

// A builder's error names what was being wired, once, and stays
// inspectable; success stays nil.
func TestAnnotate(t *testing.T) {
	cause := errors.New("SEAL_KEY: too short")
	build := func(fail bool) (err error) {
		defer Annotate(&err, "checkout")
		if fail {
			return cause
		}
		return nil
	}
	if err := build(false); err != nil {
		t.Fatalf("success annotated: %v", err)
	}
	err := build(true)
	if err == nil || err.Error() != "wire checkout: SEAL_KEY: too short" || !errors.Is(err, cause) {
		t.Fatalf("got %v", err)
	}
}

// Package adyentest starts Adyen's test double for stack tests: Prism
// serving Adyen's Checkout description before the front that plays Adyen's
// test platform (internal/devstack/adyenmock), with the test credentials a
// local stack is given, and an address nothing listens on (an acquirer
// refusing every connection).
package adyentest

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
)

// The test credentials (not secrets).
const (
	APIKey  = "AQE_test_key_not_secret"
	HMACKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	Account = "PayreqECOM"
)

// Start runs the double for t's lifetime.
func Start(t testing.TB) *adyenmock.Mock {
	t.Helper()
	infra, err := devstack.InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := devstack.EnsureNodeModules(infra, io.Discard); err != nil {
		t.Fatal(err)
	}
	m, err := adyenmock.Run(context.Background(), infra, t.TempDir(), APIKey, HMACKey)
	if err != nil {
		t.Fatalf("start Prism and the Adyen front: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

// StackParams are the template parameters of a local stack charging
// through m.
func StackParams(m *adyenmock.Mock) map[string]string {
	return map[string]string{"LocalAdyenApiKey": APIKey, "LocalAdyenApiBase": m.URL, "LocalAdyenHmacKeys": HMACKey, "AdyenMerchantAccount": Account}
}

// Unreachable is an http address nothing listens on: every connection to
// it is refused.
func Unreachable(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

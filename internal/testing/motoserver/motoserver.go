// Package motoserver gives a test its own moto_server (AWS's reference
// emulator, installed with cfn-lint on every machine), started the way the
// local stack starts it (devstack.StartMoto): loopback only, ready once it
// says it listens, stopped with the test. A missing moto_server fails the
// test.
package motoserver

import (
	"context"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testing/needs"
)

// Start runs moto_server for t and returns its endpoint (every service,
// Secrets Manager included, answers there).
func Start(t testing.TB) string {
	t.Helper()
	needs.External(t, "moto_server")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := devstack.StartMoto(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e.SQS // moto itself: only DynamoDB goes through the local stack's proxy
}

package stripe_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testing/needs"
)

// The production stacks of this package's tests run on one pair of
// emulators (DynamoDB Local, fauxqs), started on first use, each stack under
// a stack name of its own: its own tables, queues and buckets, so a test
// sees only its own records and its pollers only its own messages, as with
// emulators of its own, while the JVM and fauxqs start once per package
// instead of once per test. With AWS_ENDPOINT_URL (LocalStack) set, the
// stacks run there, as before.

var (
	emuOnce sync.Once
	emu     *devstack.Emulators
	emuDir  string
	emuErr  error
	stacks  atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if emu != nil {
		emu.Stop()
	}
	if emuDir != "" {
		os.RemoveAll(emuDir)
	}
	os.Exit(code)
}

// stackOptions are the options of a new production stack of t: a state
// directory and a stack name of its own, on the package's emulators.
func stackOptions(t *testing.T) devstack.Options {
	t.Helper()
	needs.External(t, "the local emulators")
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		emuOnce.Do(func() {
			var infra string
			if emuDir, emuErr = os.MkdirTemp("", "payreq-stripe-emu-"); emuErr != nil {
				return
			}
			if infra, emuErr = devstack.InfraDir(); emuErr != nil {
				return
			}
			if emuErr = devstack.EnsureNodeModules(infra, io.Discard); emuErr != nil {
				return
			}
			// Room for the first start after npm ci, which also builds
			// DynamoDB Local's launcher, on a loaded machine.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if emu, emuErr = devstack.StartEmulators(ctx, infra, filepath.Join(emuDir, "logs"), 0, 0); emuErr != nil {
				return
			}
			devstack.UseEndpoints(devstack.Endpoints{DynamoDB: emu.DynamoDB, SQS: emu.SQS, S3: emu.S3})
		})
		if emuErr != nil {
			t.Fatalf("start emulators: %v", emuErr)
		}
	}
	return devstack.Options{StateDir: t.TempDir(), StackName: fmt.Sprintf("stripe%d-%d", os.Getpid(), stacks.Add(1))}
}

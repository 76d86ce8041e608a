//go:build unix

package devstack

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockInfra holds an exclusive lock on infra/local while `npm ci` may run:
// `go test ./...` starts one process per package, and two concurrent
// `npm ci` runs delete each other's node_modules.
func lockInfra(infra string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(infra, "node_modules.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

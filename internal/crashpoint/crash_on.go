//go:build crashtest

package crashpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this binary can crash at a point.
const Enabled = true

var (
	target = parse(os.Getenv(EnvVar))
	hits   atomic.Int64
)

type point struct {
	name string
	nth  int64
}

func parse(v string) point {
	name, n, _ := strings.Cut(v, "@")
	p := point{name: name, nth: 1}
	if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
		p.nth = k
	}
	return p
}

// Hit kills the process with SIGKILL at the configured point's n-th hit.
func Hit(name string) {
	if target.name == "" || name != target.name {
		return
	}
	if hits.Add(1) != target.nth {
		return
	}
	os.Stderr.WriteString("crashpoint: SIGKILL at " + name + "\n")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns: the signal is fatal
}

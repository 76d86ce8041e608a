package payreq_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// `make dev` passes its port options to paydev, and a second stack gets its
// own SFTP port and state directory by default, so two run side by side.
func TestMakeDevPortOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-port 3000 -sftp-port 2222 -state-dir .paydev"},
		{[]string{"PORT=3001", "SFTP_PORT=2223"}, "-port 3001 -sftp-port 2223 -state-dir .paydev-3001"},
		{[]string{"PORT=3005"}, "-port 3005 -sftp-port 2227 -state-dir .paydev-3005"},
		{[]string{"PORT=3001", "SFTP_PORT=2300", "STATE_DIR=/tmp/b"}, "-port 3001 -sftp-port 2300 -state-dir /tmp/b"},
	} {
		cmd := exec.Command("make", append([]string{"--no-print-directory", "-n", "dev"}, c.args...)...)
		// Under `make test` this is a sub-make: do not inherit its flags
		// (they print "Entering/Leaving directory" lines).
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=", "MFLAGS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n dev %v: %v\n%s", c.args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if last := lines[len(lines)-1]; last != "exec .paydev/bin/paydev "+c.want {
			t.Errorf("make dev %v runs %q, want paydev %s", c.args, last, c.want)
		}
	}
}

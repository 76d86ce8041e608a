package devstack

import "syscall"

// processGroup puts an emulator in its own process group (so Stop kills its
// children too) and has the kernel kill it if paydev dies without cleaning up.
func processGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

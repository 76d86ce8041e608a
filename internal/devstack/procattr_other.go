//go:build !linux

package devstack

import "syscall"

func processGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

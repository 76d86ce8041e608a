//go:build !unix

package devstack

// lockInfra: the in-process mutex alone (no flock on this platform).
func lockInfra(string) (func(), error) { return func() {}, nil }

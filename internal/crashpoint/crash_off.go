//go:build !crashtest

package crashpoint

// Hit does nothing outside crashtest builds.
func Hit(string) {}

// Enabled reports whether this binary can crash at a point.
const Enabled = false

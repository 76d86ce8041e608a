// Package bench holds the load harness of `make bench` (bench_test.go, build
// tag bench): each path of the service through the local stack against a
// ceiling program making the same AWS calls, printed as one table. See
// docs/testing.md.
package bench

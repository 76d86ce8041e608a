// Package faults plans the failures of an in-memory fake's calls
// (memstore, memobjects): the n-th next call of a method fails before it
// changes anything (a timeout) or after (the answer lost: a crash after
// the write), and every call is counted, so a sweep can fail each call of
// a run in turn. A Plan is not safe for concurrent use: the fake calls it
// under its own lock. The zero value is an empty plan.
package faults

import "maps"

// Plan counts calls by method and holds the failures planned for them.
type Plan struct {
	calls   map[string]int
	planned []fault
}

type fault struct {
	method string
	call   int // the method's call number it fires on (1-based)
	err    error
	after  bool
}

// Fail makes the n-th next call of method (1: the next one) return err
// before it changes anything.
func (p *Plan) Fail(method string, n int, err error) {
	p.planned = append(p.planned, fault{method: method, call: p.calls[method] + n, err: err})
}

// CrashAfter makes the n-th next call of method do its work and then
// return err.
func (p *Plan) CrashAfter(method string, n int, err error) {
	p.planned = append(p.planned, fault{method: method, call: p.calls[method] + n, err: err, after: true})
}

// Begin counts a call of method and returns the error to fail it with
// before its work, or the one to return after it (nil: none).
func (p *Plan) Begin(method string) (before, after error) {
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[method]++
	for _, f := range p.planned {
		if f.method == method && f.call == p.calls[method] {
			if f.after {
				after = f.err
			} else {
				before = f.err
			}
		}
	}
	return before, after
}

// Calls returns how many times method was called.
func (p *Plan) Calls(method string) int { return p.calls[method] }

// Counts returns the calls made of every method.
func (p *Plan) Counts() map[string]int { return maps.Clone(p.calls) }

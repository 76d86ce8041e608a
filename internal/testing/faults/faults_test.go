package faults

import (
	"errors"
	"testing"
)

func TestPlanFiresOnTheNthNextCall(t *testing.T) {
	var p Plan
	boom, lost := errors.New("boom"), errors.New("lost")
	p.Begin("Put") // call 1
	p.Fail("Put", 2, boom)
	p.CrashAfter("Get", 1, lost)
	var got [][2]error
	for range 3 {
		b, a := p.Begin("Put")
		got = append(got, [2]error{b, a})
	}
	if got[0] != [2]error{} || got[1] != [2]error{boom, nil} || got[2] != [2]error{} {
		t.Fatalf("Put calls 2 to 4: %v, want only call 3 failed before its work", got)
	}
	if b, a := p.Begin("Get"); b != nil || a != lost {
		t.Fatalf("Get: %v %v, want the crash after its work", b, a)
	}
	if p.Calls("Put") != 4 || p.Counts()["Get"] != 1 {
		t.Fatalf("counts %v", p.Counts())
	}
}

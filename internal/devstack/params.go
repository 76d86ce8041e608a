package devstack

import (
	"github.com/payreq/payreq/internal/cfn"
)

// LocalParams are the template parameters of a local stack: the given ones,
// plus, for every parameter a function variable takes as is (VAR: !Ref
// Param), the value of VAR in getenv (paydev's own environment). So
// `SANDBOX_QR_DELAY=200ms make dev` sets SandboxQrDelay, and the function
// still reads SANDBOX_QR_DELAY from its template environment only.
func LocalParams(template []byte, given map[string]string, getenv func(string) string) map[string]string {
	params := map[string]string{}
	if t, err := cfn.Parse(template); err == nil {
		if fns, err := t.Functions(); err == nil {
			for _, f := range fns {
				for name, n := range f.Environment {
					if n.Tag != "!Ref" {
						continue
					}
					if _, isParam := t.Parameters[n.Value]; !isParam {
						continue
					}
					if v := getenv(name); v != "" {
						params[n.Value] = v
					}
				}
			}
		}
	}
	for k, v := range given {
		params[k] = v
	}
	return params
}

package batchproc

// SetCrashHook makes p stop at every crash point for which at returns true,
// as if the process died there: no lease, row or part is cleaned up.
func SetCrashHook(p *Processor, at func(point string) bool) { p.crashAt = at }

// IsCrash reports whether err is a simulated crash.
func IsCrash(err error) bool { return isCrash(err) }

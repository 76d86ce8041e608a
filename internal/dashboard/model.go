package dashboard

import (
	"time"
)

// Delivery is one notification attempt as the dashboard shows it.
type Delivery struct {
	EventID    string
	Attempt    int
	At         time.Time
	URL        string
	StatusCode int
	Error      string
	Outcome    string
	NextAt     time.Time
}

// Batch is one uploaded batch file's summary.
type Batch struct {
	File       string
	State      string
	Approved   int
	Declined   int
	Pending    int
	Rejected   int
	Duplicate  int
	Rows       int
	ResultKey  string // result file name in /results; empty until done
	UpdatedAt  time.Time
	ReceivedAt time.Time
	// LinesDone of LinesTotal: the file's progress (LinesTotal is 0 until
	// the file has been read through once, while it is hashed).
	LinesDone, LinesTotal int64
}

// Running reports whether the file is still being processed.
func (b Batch) Running() bool { return b.State != "done" && b.State != "failed" }

// Finish estimates when a running file is done: the lines left at the
// pace so far (from its receipt to its last progress); zero when unknown.
func (b Batch) Finish() time.Time {
	if !b.Running() || b.LinesDone <= 0 || b.LinesTotal <= b.LinesDone || !b.UpdatedAt.After(b.ReceivedAt) {
		return time.Time{}
	}
	spent := b.UpdatedAt.Sub(b.ReceivedAt)
	left := time.Duration(float64(spent) * float64(b.LinesTotal-b.LinesDone) / float64(b.LinesDone))
	return b.UpdatedAt.Add(left).Truncate(time.Second)
}

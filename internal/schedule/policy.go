package schedule

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Overlap says what a fire does while a run of the schedule it started
// earlier is still going.
type Overlap string

// The overlap policies (Temporal's, but for terminate).
const (
	// OverlapSkip: the fire is skipped (recorded). The default.
	OverlapSkip Overlap = "skip"
	// OverlapBufferOne: the fire waits for the running run to end, then
	// starts; a fire that finds one waiting already is skipped.
	OverlapBufferOne Overlap = "buffer_one"
	// OverlapBufferAll: every fire waits its turn; they start one at a
	// time, each after the one before ended.
	OverlapBufferAll Overlap = "buffer_all"
	// OverlapCancelOther: the running runs are cancelled, and the fire
	// starts when they have ended; a later fire replaces a waiting one.
	OverlapCancelOther Overlap = "cancel_other"
	// OverlapAllowAll: the fire starts at once, whatever runs.
	OverlapAllowAll Overlap = "allow_all"
)

// overlaps lists the policies, for messages.
var overlaps = []Overlap{OverlapSkip, OverlapBufferOne, OverlapBufferAll, OverlapCancelOther, OverlapAllowAll}

// valid reports whether o is a policy; empty is (it means the default).
func (o Overlap) valid() bool {
	if o == "" {
		return true
	}
	for _, v := range overlaps {
		if o == v {
			return true
		}
	}
	return false
}

// Policy says what a schedule does when it fires.
type Policy struct {
	// Overlap applies to scheduled fires and, unless they name their own,
	// to triggers. Empty means OverlapSkip.
	Overlap Overlap
	// CatchUpWindow is how late a scheduled fire may still start: a fire
	// missed while no node ran the scheduler starts when one does if it
	// is at most this late, and is recorded as missed otherwise. Zero
	// means DefaultCatchUpWindow.
	CatchUpWindow time.Duration
	// PauseOnFailure pauses the schedule when one of its runs fails.
	PauseOnFailure bool
	// MaxRuns ends the schedule after this many scheduled runs started
	// (triggers and backfills do not count); zero means no limit.
	MaxRuns int
}

// Policy bounds and defaults.
const (
	// DefaultCatchUpWindow: a fire a minute late still starts, which
	// covers a scheduler's takeover by another node; fires missed while
	// the whole cluster was down for longer are recorded, not run, unless
	// the schedule asks for a wider window.
	DefaultCatchUpWindow = time.Minute
	// MinCatchUpWindow keeps a window from refusing fires that are late
	// only by the scheduler's own latency.
	MinCatchUpWindow = time.Second
	// MaxCatchUpWindow bounds the window: a year.
	MaxCatchUpWindow = 366 * 24 * time.Hour
)

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.Overlap == "" {
		p.Overlap = OverlapSkip
	}
	if p.CatchUpWindow == 0 {
		p.CatchUpWindow = DefaultCatchUpWindow
	}
	return p
}

// Check reports p's problems, each with its path under prefix
// ("policy"), as an *weft.ScheduleError; nil when there is none.
func (p Policy) Check(prefix string) error {
	var errs problems
	if !p.Overlap.valid() {
		errs.add(prefix+".overlap", "must be one of %v, got %q", overlaps, p.Overlap)
	}
	if p.CatchUpWindow != 0 && (p.CatchUpWindow < MinCatchUpWindow || p.CatchUpWindow > MaxCatchUpWindow) {
		errs.add(prefix+".catch_up_window", "must be from %s to %s, got %s", MinCatchUpWindow, MaxCatchUpWindow, p.CatchUpWindow)
	}
	if p.MaxRuns < 0 {
		errs.add(prefix+".max_runs", "must not be negative (0: no limit), got %d", p.MaxRuns)
	}
	if len(errs) > 0 {
		return errs.err()
	}
	return nil
}

// checkOverlap reports an overlap policy that is not one, for a trigger
// or a backfill.
func checkOverlap(o Overlap) error {
	if !o.valid() {
		return &weft.ScheduleError{Problems: []weft.Problem{{Path: "overlap", Message: fmt.Sprintf("must be one of %v, got %q", overlaps, o)}}}
	}
	return nil
}

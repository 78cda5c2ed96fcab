package schedule

import (
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Fire is one time a schedule fires.
type Fire struct {
	// Nominal is the time the calendar names (for a trigger, the second
	// it was asked for): it names the run (InstanceID) and is the
	// ${ schedule.time } of its input.
	Nominal time.Time     `json:"nominal"`
	Kind    weft.FireKind `json:"kind"`
	// Overlap is a trigger's or backfill's own policy; empty for the
	// schedule's.
	Overlap Overlap `json:"overlap,omitempty"`
}

// Backfill is an operator's request for the runs of a past range, taken
// a bounded number of fires at a time.
type Backfill struct {
	// From and To bound the nominal times, both included.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Overlap applies to the backfill's fires; empty for the schedule's.
	Overlap Overlap `json:"overlap,omitempty"`
	// Cursor is the nominal time of the last fire taken; zero before the
	// first.
	Cursor time.Time `json:"cursor,omitzero"`
}

// State is what a schedule remembers between two Steps. The scheduler
// stores it with the schedule and hands it back to Step.
type State struct {
	// Cursor is the nominal time of the last scheduled fire taken
	// (started, buffered or skipped): no fire at or before it is taken
	// again, however the clock moves. A new schedule starts it at its
	// creation.
	Cursor time.Time `json:"cursor"`
	// Running lists the runs started that had not ended at the last Step.
	Running []weft.ScheduleRun `json:"running,omitempty"`
	// Buffer lists the fires waiting for the running runs to end.
	Buffer []Fire `json:"buffer,omitempty"`
	// Triggers lists the triggers asked for and not yet taken.
	Triggers []Fire `json:"triggers,omitempty"`
	// Backfills lists the backfills under way.
	Backfills []Backfill `json:"backfills,omitempty"`
	// Recent lists the last RecentRuns runs that ended, newest first.
	Recent []weft.ScheduleRun `json:"recent,omitempty"`
	// Paused stops scheduled fires (triggers and backfills still run).
	Paused bool `json:"paused,omitempty"`
	// Runs counts the scheduled runs started, for Policy.MaxRuns.
	Runs int `json:"runs"`
}

// Bounds on what a State holds.
const (
	// RecentRuns is how many ended runs a State remembers.
	RecentRuns = 10
	// MaxBuffer bounds the fires waiting (OverlapBufferAll); a fire
	// beyond it is skipped.
	MaxBuffer = 1000
	// MaxTriggers bounds the triggers waiting to be taken.
	MaxTriggers = 100
	// MaxBackfills bounds the backfills under way at once.
	MaxBackfills = 10
	// MaxBackfillFires bounds the fires of one backfill.
	MaxBackfillFires = 10000
	// maxStarts bounds the runs one Step starts; more are left for the
	// next, which is due at once.
	maxStarts = 1000
	// maxCounted bounds the skipped fires one range counts one by one;
	// past it the cursor jumps and the range says there were more.
	maxCounted = 1000
)

// clone returns a copy of s that shares no slice with it.
func (s State) clone() State {
	s.Running = append([]weft.ScheduleRun(nil), s.Running...)
	s.Buffer = append([]Fire(nil), s.Buffer...)
	s.Triggers = append([]Fire(nil), s.Triggers...)
	s.Backfills = append([]Backfill(nil), s.Backfills...)
	s.Recent = append([]weft.ScheduleRun(nil), s.Recent...)
	return s
}

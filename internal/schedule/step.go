package schedule

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// SkipReason says why a fire did not start a run.
type SkipReason string

// The reasons a fire is skipped.
const (
	// SkipOverlap: a run was still going (OverlapSkip).
	SkipOverlap SkipReason = "overlap"
	// SkipBufferFull: a fire was waiting already (OverlapBufferOne), or
	// MaxBuffer were (OverlapBufferAll).
	SkipBufferFull SkipReason = "buffer_full"
	// SkipReplaced: a later fire took its place in the buffer
	// (OverlapCancelOther).
	SkipReplaced SkipReason = "replaced"
	// SkipMissed: it was due longer ago than the catch-up window when a
	// scheduler next looked.
	SkipMissed SkipReason = "missed"
	// SkipPaused: it came due, or waited in the buffer, while the schedule
	// was paused.
	SkipPaused SkipReason = "paused"
	// SkipDuplicate: a run with its instance id (the same nominal second)
	// is running already.
	SkipDuplicate SkipReason = "duplicate"
)

// Skip records fires that did not start a run: one fire, or a range of
// fires skipped for one reason: Count of them, the first at Nominal and
// the last at Last. More says that there were more than were counted, and
// Last is then a bound: no fire of the range is after it.
type Skip struct {
	Nominal time.Time     `json:"nominal"`
	Last    time.Time     `json:"last,omitzero"`
	Count   int           `json:"count"`
	More    bool          `json:"more,omitempty"`
	Kind    weft.FireKind `json:"kind"`
	Reason  SkipReason    `json:"reason"`
}

// Input is what Step decides from.
type Input struct {
	// ID is the schedule's id; with a fire's nominal time it names the
	// run (InstanceID) and seeds the fire's jitter.
	ID       string
	Calendar *Calendar
	// Policy, with its defaults applied by Step.
	Policy Policy
	// State is the state the last Step returned, with each running run's
	// Status read since.
	State State
	Now   time.Time
	// RunCheck is how soon to look again while a decision waits on a run's
	// end (a buffered fire, a cancellation, a failure that would pause);
	// zero means 5s.
	RunCheck time.Duration
	// RunSettle is how soon to look again while runs go on and nothing
	// waits on their end, so that the state's runs and recent runs are
	// at most this stale (half as much again when the next fire is due by
	// then: that fire's Step looks at them, and a second Step per fire
	// would cost a large fleet with jitter a third more); zero means a
	// minute.
	RunSettle time.Duration
}

// Decision is what Step decided.
type Decision struct {
	// State is the schedule's new state, to store before the next Step.
	State State
	// Start lists the fires to start runs for, in order; each run's
	// instance id is InstanceID(ID, fire.Nominal), and State.Running
	// lists them already.
	Start []Fire
	// Cancel lists the instance ids of runs to cancel.
	Cancel []string
	// Skipped records the fires that started nothing, and why.
	Skipped []Skip
	// Ended lists the runs seen ended, as State.Recent has them.
	Ended []weft.ScheduleRun
	// Paused, when not empty, says why the schedule paused itself.
	Paused string
	// Wake is when to call Step again at the latest; zero when nothing is
	// due until an operator acts.
	Wake time.Time
}

// Step decides what a schedule does now: it retires the runs that ended,
// starts what waited for them, takes every fire that has come due
// (scheduled, then triggers, then backfills) under its overlap policy,
// and says when to look again. It is a pure function of its input.
func Step(in Input) Decision {
	s := stepper{in: in, p: in.Policy.WithDefaults(), st: in.State.clone()}
	if s.in.RunCheck <= 0 {
		s.in.RunCheck = 5 * time.Second
	}
	if s.in.RunSettle <= 0 {
		s.in.RunSettle = time.Minute
	}
	s.retire()
	s.drainBuffer()
	s.scheduled()
	s.triggers()
	s.backfills()
	s.d.State = s.st
	s.wakeForRuns()
	return s.d
}

// stepper carries one Step's work.
type stepper struct {
	in Input
	p  Policy
	st State
	d  Decision
	// full is set once maxStarts runs started: the rest waits for the next
	// Step, due at once.
	full bool
}

// retire moves the runs with a terminal status to Recent, and pauses the
// schedule on a failure when the policy says so.
func (s *stepper) retire() {
	running := s.st.Running[:0]
	for _, r := range s.st.Running {
		if !r.Status.Terminal() && !r.Gone {
			running = append(running, r)
			continue
		}
		r.EndedAt = s.in.Now
		s.d.Ended = append(s.d.Ended, r)
		s.st.Recent = append([]weft.ScheduleRun{r}, s.st.Recent...)
		if r.Status == weft.StatusFailed && s.p.PauseOnFailure && !s.st.Paused {
			s.d.Paused = fmt.Sprintf("run %s failed", r.InstanceID)
			s.pause()
		}
	}
	s.st.Running = running
	if len(s.st.Recent) > RecentRuns {
		s.st.Recent = s.st.Recent[:RecentRuns]
	}
}

// pause pauses the schedule; scheduled fires waiting in the buffer are
// dropped (they were due while it ran, and the pause says not to run).
func (s *stepper) pause() {
	s.st.Paused = true
	kept := s.st.Buffer[:0]
	for _, f := range s.st.Buffer {
		if f.Kind == weft.FireScheduled {
			s.skip(f, SkipPaused)
			continue
		}
		kept = append(kept, f)
	}
	s.st.Buffer = kept
}

// drainBuffer starts waiting fires while nothing runs.
func (s *stepper) drainBuffer() {
	for len(s.st.Buffer) > 0 && len(s.st.Running) == 0 && !s.full {
		f := s.st.Buffer[0]
		s.st.Buffer = s.st.Buffer[1:]
		s.start(f)
	}
}

// scheduled takes the calendar's fires that have come due since the
// cursor: each starts (under the overlap policy) if it is inside the
// catch-up window, and is recorded as missed otherwise.
func (s *stepper) scheduled() {
	if s.st.Paused {
		return
	}
	for !s.full {
		if s.p.MaxRuns > 0 && s.st.Runs+s.buffered(weft.FireScheduled) >= s.p.MaxRuns {
			return
		}
		nominal, ok := s.in.Calendar.Next(s.st.Cursor)
		if !ok {
			return
		}
		due := s.in.Calendar.Due(s.in.ID, nominal)
		if due.After(s.in.Now) {
			s.wake(due)
			return
		}
		s.st.Cursor = nominal
		f := Fire{Nominal: nominal, Kind: weft.FireScheduled}
		if s.in.Now.Sub(due) <= s.p.CatchUpWindow {
			s.offer(f, s.p.Overlap)
			continue
		}
		s.skip(f, SkipMissed)
		if last := &s.d.Skipped[len(s.d.Skipped)-1]; last.Count >= maxCounted {
			// Every fire before this edge was due more than the window
			// ago, whatever its jitter: jump over them. Last is then a
			// bound that no skipped fire is after.
			if edge := s.in.Now.Add(-s.p.CatchUpWindow - s.in.Calendar.jitter - time.Nanosecond); edge.After(s.st.Cursor) {
				s.st.Cursor = edge
				last.Last, last.More = edge, true
			}
		}
	}
	s.wake(s.in.Now)
}

// buffered counts the fires of a kind waiting in the buffer.
func (s *stepper) buffered(k weft.FireKind) int {
	n := 0
	for _, f := range s.st.Buffer {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// triggers takes the triggers asked for since the last Step.
func (s *stepper) triggers() {
	for len(s.st.Triggers) > 0 && !s.full {
		f := s.st.Triggers[0]
		s.st.Triggers = s.st.Triggers[1:]
		s.offer(f, s.overlapOf(f))
	}
	if len(s.st.Triggers) > 0 {
		s.wake(s.in.Now)
	}
}

// backfills takes the fires of the backfills under way, each under its
// own overlap policy; they ignore the catch-up window, the pause and
// MaxRuns, which an operator's request for a past range overrides.
func (s *stepper) backfills() {
	kept := s.st.Backfills[:0]
	for _, b := range s.st.Backfills {
		after := b.Cursor
		if after.IsZero() {
			after = b.From.Add(-time.Nanosecond)
		}
		for !s.full {
			nominal, ok := s.in.Calendar.Next(after)
			if !ok || nominal.After(b.To) {
				after = time.Time{}
				break
			}
			s.offer(Fire{Nominal: nominal, Kind: weft.FireBackfill, Overlap: b.Overlap}, s.overlapOf(Fire{Overlap: b.Overlap}))
			after, b.Cursor = nominal, nominal
		}
		if !after.IsZero() {
			kept = append(kept, b)
		}
	}
	s.st.Backfills = kept
	if len(kept) > 0 {
		s.wake(s.in.Now)
	}
}

// overlapOf is the policy a fire runs under: its own, or the schedule's.
func (s *stepper) overlapOf(f Fire) Overlap {
	if f.Overlap != "" {
		return f.Overlap
	}
	return s.p.Overlap
}

// offer applies an overlap policy to a fire that has come due.
func (s *stepper) offer(f Fire, o Overlap) {
	busy := len(s.st.Running) > 0
	switch o {
	case OverlapAllowAll:
		s.start(f)
	case OverlapBufferOne:
		switch {
		case !busy && len(s.st.Buffer) == 0:
			s.start(f)
		case len(s.st.Buffer) == 0:
			s.st.Buffer = append(s.st.Buffer, f)
		default:
			s.skip(f, SkipBufferFull)
		}
	case OverlapBufferAll:
		switch {
		case !busy && len(s.st.Buffer) == 0:
			s.start(f)
		case len(s.st.Buffer) < MaxBuffer:
			s.st.Buffer = append(s.st.Buffer, f)
		default:
			s.skip(f, SkipBufferFull)
		}
	case OverlapCancelOther:
		if !busy {
			s.start(f)
			return
		}
		for i := range s.st.Running {
			if r := &s.st.Running[i]; !r.CancelRequested {
				r.CancelRequested = true
				s.d.Cancel = append(s.d.Cancel, r.InstanceID)
			}
		}
		for _, old := range s.st.Buffer {
			s.skip(old, SkipReplaced)
		}
		s.st.Buffer = append(s.st.Buffer[:0], f)
	default: // OverlapSkip
		if busy {
			s.skip(f, SkipOverlap)
			return
		}
		s.start(f)
	}
}

// start starts a run for f, unless a run of the same instance id runs.
func (s *stepper) start(f Fire) {
	id := InstanceID(s.in.ID, f.Nominal)
	for _, r := range s.st.Running {
		if r.InstanceID == id {
			s.skip(f, SkipDuplicate)
			return
		}
	}
	s.d.Start = append(s.d.Start, f)
	s.st.Running = append(s.st.Running, weft.ScheduleRun{InstanceID: id, Nominal: f.Nominal, Kind: f.Kind, StartedAt: s.in.Now, Status: weft.StatusPending})
	if f.Kind == weft.FireScheduled {
		s.st.Runs++
	}
	if len(s.d.Start) >= maxStarts {
		s.full = true
		s.wake(s.in.Now)
	}
}

// skip records one skipped fire, folding it into the last record when
// that is a range of the same kind and reason.
func (s *stepper) skip(f Fire, why SkipReason) {
	if n := len(s.d.Skipped); n > 0 {
		if last := &s.d.Skipped[n-1]; last.Reason == why && last.Kind == f.Kind && !last.More && f.Nominal.After(last.Nominal) {
			last.Count++
			last.Last = f.Nominal
			return
		}
	}
	s.d.Skipped = append(s.d.Skipped, Skip{Nominal: f.Nominal, Count: 1, Kind: f.Kind, Reason: why})
}

// wake brings the next Step forward to t.
func (s *stepper) wake(t time.Time) {
	if s.d.Wake.IsZero() || t.Before(s.d.Wake) {
		s.d.Wake = t
	}
}

// wakeForRuns brings the next Step to within RunCheck while a decision
// waits on a run's end, and within RunSettle while runs go on (1.5
// RunSettle when the next fire is due by then).
func (s *stepper) wakeForRuns() {
	if len(s.st.Running) == 0 {
		return
	}
	cancelling := false
	for _, r := range s.st.Running {
		cancelling = cancelling || r.CancelRequested
	}
	if len(s.st.Buffer) > 0 || cancelling || s.p.PauseOnFailure && !s.st.Paused {
		s.wake(s.in.Now.Add(s.in.RunCheck))
		return
	}
	settle := s.in.Now.Add(s.in.RunSettle)
	if !s.d.Wake.IsZero() && !s.d.Wake.After(settle.Add(s.in.RunSettle/2)) {
		return // the next fire's Step is soon enough
	}
	s.wake(settle)
}

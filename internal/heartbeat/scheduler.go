package heartbeat

import (
	"fmt"
	"time"
)

// Scheduler is the deterministic core of the heartbeat scheduler: items are
// tracked and untracked, Tick takes a batch and returns what to renew and
// what to do, Report routes the outcomes of a batch. It has no goroutines,
// clock or I/O: time comes in as Tick's argument and liveness through each
// item's Pulse. A Scheduler is not safe for concurrent use; [Service]
// serialises calls into it.
type Scheduler struct {
	cfg      Config
	capacity int

	items  map[string]*entry
	main   deque
	backup []*entry
	flight map[uint64][]*entry
	seq    uint64

	// counts by place; entries left behind in main or backup by Untrack are
	// skipped lazily and not counted.
	nMain, nBackup, nFlight int
	nShort                  int

	started  bool
	lastTick time.Time
	lastMove time.Time

	stats Stats
	renew [numOutcomes]uint64
}

type place uint8

const (
	inBackup place = iota
	inMain
	inFlight
	gone
)

type entry struct {
	item    Item
	place   place
	retries int
	short   bool
	// sentBeats is the pulse's count in the batch in flight; ackedBeats the
	// count of the last renewal that succeeded.
	sentBeats, ackedBeats uint64
	acked                 bool
}

// New returns a Scheduler for cfg, after defaults.
func New(cfg Config) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg:      cfg,
		capacity: cfg.Capacity(),
		items:    map[string]*entry{},
		flight:   map[uint64][]*entry{},
	}, nil
}

// Config returns the configuration in use, with defaults applied.
func (s *Scheduler) Config() Config { return s.cfg }

// Ready is what one Tick asks of the shell.
type Ready struct {
	// Seq names the batch; pass it to Report with the outcomes. Zero when
	// Renew is empty.
	Seq uint64
	// Renew is the batch to renew in one round trip, in order.
	Renew []Renewal
	// Actions are heartbeat timeouts found by this tick, in order.
	Actions []Action
	// Overrun reports that this tick ran at least two tick intervals after
	// the previous one (the process was starved); it still took one batch.
	Overrun bool
	// Coalesced reports that this tick came less than half a tick interval
	// after the previous one (ticks queued up during a stall) and was
	// skipped.
	Coalesced bool
	// Moved reports that this tick moved the backup queue into the main
	// deque: a new cycle started.
	Moved bool
}

// Track starts keeping it alive, or updates the tracked item with that ID
// in place (its position in the queues is kept). A new item waits in the
// backup queue: it has just been leased or started, so it needs no renewal
// before the next cycle. Track returns the warnings that concern the item
// and, if the scheduler is over capacity, that warning too.
func (s *Scheduler) Track(it Item) ([]Warning, error) {
	if err := it.validate(); err != nil {
		return nil, err
	}
	e := s.items[it.ID]
	if e == nil {
		e = &entry{place: inBackup}
		s.items[it.ID] = e
		s.backup = append(s.backup, e)
		s.nBackup++
	}
	if e.short {
		s.nShort--
	}
	e.item = it
	warns := s.itemWarnings(it)
	e.short = len(warns) > 0
	if e.short {
		s.nShort++
	}
	if w, ok := s.capacityWarning(); ok {
		warns = append(warns, w)
	}
	return warns, nil
}

// Untrack stops keeping the item alive (the attempt completed, the lease
// was released). A renewal of it that is in flight is ignored when
// reported. It reports whether the item was tracked.
func (s *Scheduler) Untrack(id string) bool {
	e := s.items[id]
	if e == nil {
		return false
	}
	s.drop(e)
	return true
}

func (s *Scheduler) drop(e *entry) {
	switch e.place {
	case inMain:
		s.nMain--
	case inBackup:
		s.nBackup--
	case inFlight:
		s.nFlight--
	}
	if e.short {
		s.nShort--
	}
	e.place = gone
	delete(s.items, e.item.ID)
}

// Tick is called every Config.Tick with the current time. It starts a new
// cycle if Config.Cycle has passed since the last one began (moving the
// backup queue into the main deque), then takes up to Config.Batch items
// from the front of the main deque. An activity whose pulse is older than
// its heartbeat timeout becomes a TimeOut action and is dropped; the others
// form the batch to renew, and stay in flight until Report.
//
// # Notes
//
//   - Every decision compares absolute times, never counts of ticks.
//   - A late tick (at least two intervals after the previous one) takes one
//     batch, not the ones it missed, and is counted as an overrun. A tick
//     less than half an interval after the previous one is skipped, so that
//     ticks queued during a stall do not release a burst.
//   - Items in flight are not in the main deque, so overlapping ticks never
//     send an item twice.
func (s *Scheduler) Tick(now time.Time) Ready {
	var r Ready
	if s.started {
		gap := now.Sub(s.lastTick)
		switch {
		case gap >= 0 && gap < s.cfg.Tick/2:
			s.stats.Coalesced++
			r.Coalesced = true
			return r
		case gap >= 2*s.cfg.Tick:
			s.stats.Overruns++
			r.Overrun = true
		}
	}
	s.stats.Ticks++
	s.lastTick = now
	if !s.started || now.Sub(s.lastMove) >= s.cfg.Cycle || now.Before(s.lastMove) {
		s.move(now)
		r.Moved = true
	}
	s.started = true

	n := min(s.cfg.Batch, s.nMain)
	batch := make([]*entry, 0, n)
	r.Renew = make([]Renewal, 0, n)
	for taken := 0; taken < s.cfg.Batch && s.main.len() > 0; {
		e := s.main.popFront()
		if e.place != inMain {
			continue // untracked while queued
		}
		taken++
		s.nMain--
		e.place = inFlight
		s.nFlight++
		var rn Renewal
		rn.Item = e.item
		if p := e.item.Pulse; p != nil && e.item.Kind == Activity {
			rn.Details, rn.LastBeat, rn.Beats = p.Last()
			if t := e.item.HeartbeatTimeout; t > 0 && now.Sub(rn.LastBeat) > t {
				s.stats.Timeouts++
				s.drop(e)
				r.Actions = append(r.Actions, Action{Kind: TimeOut, Item: e.item, Details: rn.Details, LastBeat: rn.LastBeat, Beats: rn.Beats})
				continue
			}
			rn.Changed = !e.acked || rn.Beats != e.ackedBeats
		}
		e.sentBeats = rn.Beats
		batch = append(batch, e)
		r.Renew = append(r.Renew, rn)
	}
	if len(batch) == 0 {
		r.Renew = nil
	} else {
		s.seq++
		r.Seq = s.seq
		s.flight[r.Seq] = batch
	}
	return r
}

// move starts a new cycle: the backup queue goes to the back of the main
// deque.
func (s *Scheduler) move(now time.Time) {
	if s.started {
		s.stats.Cycles++
		s.stats.CycleTime = now.Sub(s.lastMove)
		s.stats.Backlog = s.nMain
	}
	s.lastMove = now
	for _, e := range s.backup {
		if e.place != inBackup {
			continue
		}
		e.place = inMain
		s.main.pushBack(e)
	}
	s.nMain += s.nBackup
	s.nBackup = 0
	clear(s.backup)
	s.backup = s.backup[:0]
}

// Report routes the outcomes of batch seq: outcomes[i] is the outcome of
// Ready.Renew[i], and a missing one counts as Error. OK moves the item to
// the backup queue; Throttled to the front of the main deque (keeping the
// batch's order); NotFound, Cancelled and Superseded drop it with a
// CancelActivity or LoseLease action; Error sends it to the back of the main
// deque, or after Config.MaxRetries retries in this cycle to the backup
// queue. Items untracked meanwhile are ignored. Reporting an unknown or
// already reported seq does nothing.
func (s *Scheduler) Report(seq uint64, outcomes []Outcome) []Action {
	batch, ok := s.flight[seq]
	if !ok {
		return nil
	}
	delete(s.flight, seq)
	var acts []Action
	throttled := 0
	for i, e := range batch {
		o := Error
		if i < len(outcomes) && outcomes[i] < numOutcomes {
			o = outcomes[i]
		}
		s.renew[o]++
		if e.place != inFlight {
			continue // untracked while in flight
		}
		switch o {
		case OK:
			e.retries = 0
			e.acked, e.ackedBeats = true, e.sentBeats
			s.toBackup(e)
		case Throttled:
			batch[throttled] = e // reuse the batch to keep the order
			throttled++
		case NotFound, Cancelled, Superseded:
			kind := LoseLease
			if e.item.Kind == Activity {
				kind = CancelActivity
			}
			s.drop(e)
			acts = append(acts, Action{Kind: kind, Item: e.item, Outcome: o})
		default:
			e.retries++
			if e.retries > s.cfg.MaxRetries {
				e.retries = 0
				s.toBackup(e)
			} else {
				s.nFlight--
				e.place = inMain
				s.nMain++
				s.main.pushBack(e)
			}
		}
	}
	for i := throttled - 1; i >= 0; i-- {
		e := batch[i]
		s.nFlight--
		e.place = inMain
		s.nMain++
		s.main.pushFront(e)
	}
	return acts
}

func (s *Scheduler) toBackup(e *entry) {
	s.nFlight--
	e.place = inBackup
	s.nBackup++
	s.backup = append(s.backup, e)
}

// Check returns the scheduler's current warnings: over capacity, and how
// many tracked items have a TTL or heartbeat timeout that does not exceed
// two cycles. Call it at start-up, once the recovered items are tracked.
func (s *Scheduler) Check() []Warning {
	var warns []Warning
	if w, ok := s.capacityWarning(); ok {
		warns = append(warns, w)
	}
	if s.nShort > 0 {
		warns = append(warns, Warning{Code: ShortTimeout, Message: fmt.Sprintf(
			"heartbeat: %d tracked item(s) have a TTL or heartbeat timeout that does not exceed two cycles (%s)",
			s.nShort, 2*s.cfg.Cycle)})
	}
	return warns
}

// CheckTTL returns a warning when d, a lease TTL or heartbeat timeout that
// what names (for example "lease.ttl"), does not exceed two cycles. The
// engine calls it at start-up with its configured TTLs.
func (s *Scheduler) CheckTTL(what string, d time.Duration) []Warning {
	if d > 2*s.cfg.Cycle {
		return nil
	}
	return []Warning{{Code: ShortTimeout, Message: fmt.Sprintf(
		"heartbeat: %s %s does not exceed two cycles (%s): it may expire between two renewals", what, d, 2*s.cfg.Cycle)}}
}

func (s *Scheduler) itemWarnings(it Item) []Warning {
	var warns []Warning
	for _, c := range []struct {
		what string
		d    time.Duration
	}{{"TTL", it.TTL}, {"heartbeat timeout", it.HeartbeatTimeout}} {
		if c.d > 0 && c.d <= 2*s.cfg.Cycle {
			warns = append(warns, Warning{Code: ShortTimeout, ID: it.ID, Message: fmt.Sprintf(
				"heartbeat: %s %q: %s %s does not exceed two cycles (%s)", it.Kind, it.ID, c.what, c.d, 2*s.cfg.Cycle)})
		}
	}
	return warns
}

func (s *Scheduler) capacityWarning() (Warning, bool) {
	if len(s.items) <= s.capacity {
		return Warning{}, false
	}
	return Warning{Code: OverCapacity, Message: fmt.Sprintf(
		"heartbeat: %d tracked items exceed the capacity of %d (batch %d × %d ticks per cycle): items are renewed less than once per cycle",
		len(s.items), s.capacity, s.cfg.Batch, int(s.cfg.Cycle/s.cfg.Tick))}, true
}

// Stats are the scheduler's metrics.
type Stats struct {
	// Tracked is how many items are tracked; Capacity is Config.Capacity.
	Tracked, Capacity int
	// Main, Backup and InFlight say where the tracked items are.
	Main, Backup, InFlight int
	// Renewals counts reported renewals by outcome.
	Renewals map[Outcome]uint64
	// Ticks counts ticks that took a batch; Overruns the late ones among
	// them; Coalesced the ticks skipped because they came too early.
	Ticks, Overruns, Coalesced uint64
	// Timeouts counts heartbeat timeouts.
	Timeouts uint64
	// Cycles counts moves of the backup queue into the main deque after the
	// first; CycleTime is the achieved cycle time, the time between the
	// last two moves; Backlog is how many items were still in the main
	// deque at the last move (not visited within their cycle).
	Cycles    uint64
	CycleTime time.Duration
	Backlog   int
	// Warnings are the current warnings (see Check).
	Warnings []Warning
}

// Stats returns the current metrics.
func (s *Scheduler) Stats() Stats {
	st := s.stats
	st.Tracked = len(s.items)
	st.Capacity = s.capacity
	st.Main, st.Backup, st.InFlight = s.nMain, s.nBackup, s.nFlight
	st.Renewals = make(map[Outcome]uint64, numOutcomes)
	for o, n := range s.renew {
		st.Renewals[Outcome(o)] = n
	}
	st.Warnings = s.Check()
	return st
}

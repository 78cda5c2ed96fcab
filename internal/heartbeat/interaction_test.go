package heartbeat_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/internal/heartbeat"
)

// TestInteraction scripts the core step by step and compares the exact
// trace: batches, actions, warnings and metrics. Each file in
// testdata/interaction is one scheduler; testdata/README.md describes the
// format. `go test ./internal/heartbeat -rewrite` writes what the scheduler
// does now as the expected outputs.
func TestInteraction(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/interaction", func(t *testing.T, path string) {
		t.Parallel()
		in := &interaction{pulses: map[string]*pulse{}}
		datadriven.RunTest(t, path, in.run)
	})
}

// interaction runs one scheduler through the commands of a file, one
// directive at a time:
//
//	config [tick=D] [batch=N] [cycle=D] [max_retries=N]   first; unset fields take their defaults
//	track ID KIND [ttl=D] [timeout=D] [nopulse]           KIND: activity|instance|lock
//	untrack ID
//	beat ID AT [DETAILS]                                  the guest beats at AT
//	tick AT                                               AT is an offset from epoch
//	ticks FROM TO                                         every Tick; idle ones print nothing
//	report SEQ OUTCOME...                                 one outcome per batch item
//	check | stats
//
// A renewal prints as ID, or ID[details] when its details changed. A
// directive that produces nothing prints "ok", as etcd/raft's do, so that
// an empty expected output is never mistaken for a forgotten one.
type interaction struct {
	s      *heartbeat.Scheduler
	pulses map[string]*pulse
}

func (in *interaction) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	if d.Cmd != "config" && in.s == nil {
		d.Fatalf(t, "%s before config", d.Cmd)
	}
	// arity fails a directive with too few or too many arguments, so that
	// a slip such as "tick 1s 2s" for "ticks 1s 2s" is not half run.
	arity := func(lo, hi int) {
		if n := len(d.CmdArgs); n < lo || n > hi {
			d.Fatalf(t, "%s: %d arguments, want %d to %d", d.Cmd, n, lo, hi)
		}
	}
	// word is the i-th argument, which must be a bare word (an operand,
	// not an option).
	word := func(i int) string {
		if i >= len(d.CmdArgs) || len(d.CmdArgs[i].Vals) > 0 {
			d.Fatalf(t, "%s: argument %d must be a word", d.Cmd, i+1)
		}
		return d.CmdArgs[i].Key
	}
	words := func(from int) []string {
		var ws []string
		for i := from; i < len(d.CmdArgs); i++ {
			ws = append(ws, word(i))
		}
		return ws
	}
	dur := func(v string) time.Duration {
		dd, err := time.ParseDuration(v)
		if err != nil {
			d.Fatalf(t, "bad duration %q: %v", v, err)
		}
		return dd
	}
	warn := func(ws []heartbeat.Warning) {
		for _, w := range ws {
			fmt.Fprintf(&out, "warning %s: %s\n", w.Code, w.Message)
		}
	}
	acts := func(as []heartbeat.Action) {
		for _, a := range as {
			fmt.Fprintf(&out, "action %s\n", a)
		}
	}
	tick := func(at time.Duration, prefix string, always bool) {
		r := in.s.Tick(epoch.Add(at))
		var flags []string
		if r.Moved {
			flags = append(flags, "cycle")
		}
		if r.Overrun {
			flags = append(flags, "overrun")
		}
		if r.Coalesced {
			flags = append(flags, "coalesced")
		}
		ids := make([]string, len(r.Renew))
		for i, rn := range r.Renew {
			ids[i] = rn.ID
			if rn.Changed && rn.Details != nil {
				ids[i] += "[" + string(rn.Details) + "]"
			}
		}
		if !always && len(r.Renew) == 0 && len(r.Actions) == 0 && !r.Moved && !r.Overrun && !r.Coalesced {
			return
		}
		fmt.Fprintf(&out, "%srenew#%d [%s]", prefix, r.Seq, strings.Join(ids, " "))
		if len(flags) > 0 {
			fmt.Fprintf(&out, " %s", strings.Join(flags, " "))
		}
		out.WriteString("\n")
		acts(r.Actions)
	}
	switch d.Cmd {
	case "config":
		if in.s != nil {
			d.Fatalf(t, "config twice: one file is one scheduler")
		}
		var cfg heartbeat.Config
		for _, arg := range d.CmdArgs {
			arg.ExpectNumVals(t, 1)
			switch arg.Key {
			case "tick":
				arg.Scan(t, 0, &cfg.Tick)
			case "batch":
				arg.Scan(t, 0, &cfg.Batch)
			case "cycle":
				arg.Scan(t, 0, &cfg.Cycle)
			case "max_retries":
				arg.Scan(t, 0, &cfg.MaxRetries)
			default:
				d.Fatalf(t, "unknown config field %q", arg.Key)
			}
		}
		s, err := heartbeat.New(cfg)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		in.s = s
		// The configuration in use, defaults applied, so that a file
		// shows every number its trace depends on.
		c := s.Config()
		fmt.Fprintf(&out, "tick=%s batch=%d cycle=%s max_retries=%d capacity=%d\n", c.Tick, c.Batch, c.Cycle, c.MaxRetries, c.Capacity())
	case "track":
		arity(2, 5)
		it := heartbeat.Item{ID: word(0)}
		switch kind := word(1); kind {
		case "activity":
			it.Kind = heartbeat.Activity
		case "instance":
			it.Kind = heartbeat.InstanceLease
		case "lock":
			it.Kind = heartbeat.LockLease
		default:
			d.Fatalf(t, "unknown kind %q", kind)
		}
		withPulse := it.Kind == heartbeat.Activity
		for _, opt := range d.CmdArgs[2:] {
			switch {
			case opt.Key == "ttl" && len(opt.Vals) == 1:
				it.TTL = dur(opt.Vals[0])
			case opt.Key == "timeout" && len(opt.Vals) == 1:
				it.HeartbeatTimeout = dur(opt.Vals[0])
			case opt.Key == "nopulse" && len(opt.Vals) == 0:
				withPulse = false
			default:
				d.Fatalf(t, "unknown option %q", opt)
			}
		}
		if withPulse {
			if in.pulses[it.ID] == nil {
				in.pulses[it.ID] = &pulse{at: epoch}
			}
			it.Pulse = in.pulses[it.ID]
		}
		ws, err := in.s.Track(it)
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		}
		warn(ws)
	case "untrack":
		arity(1, 1)
		fmt.Fprintf(&out, "tracked=%v\n", in.s.Untrack(word(0)))
	case "beat":
		arity(2, 3)
		p := in.pulses[word(0)]
		if p == nil {
			d.Fatalf(t, "beat: %s has no pulse", word(0))
		}
		details := ""
		if len(d.CmdArgs) > 2 {
			details = word(2)
		}
		p.beat(epoch.Add(dur(word(1))), details)
	case "tick":
		arity(1, 1)
		tick(dur(word(0)), "", true)
	case "ticks":
		arity(2, 2)
		for at := dur(word(0)); at <= dur(word(1)); at += in.s.Config().Tick {
			tick(at, "@"+at.String()+" ", false)
		}
	case "report":
		arity(1, len(d.CmdArgs))
		seq, err := strconv.ParseUint(word(0), 10, 64)
		if err != nil {
			d.Fatalf(t, "report: %v", err)
		}
		var got []heartbeat.Outcome
		for _, v := range words(1) {
			o, ok := outcome(v)
			if !ok {
				d.Fatalf(t, "unknown outcome %q", v)
			}
			got = append(got, o)
		}
		acts(in.s.Report(seq, got))
	case "check":
		arity(0, 0)
		warn(in.s.Check())
	case "stats":
		arity(0, 0)
		st := in.s.Stats()
		fmt.Fprintf(&out, "tracked=%d capacity=%d main=%d backup=%d inflight=%d\n",
			st.Tracked, st.Capacity, st.Main, st.Backup, st.InFlight)
		var rs []string
		for o := heartbeat.Error; o <= heartbeat.Superseded; o++ {
			if n := st.Renewals[o]; n > 0 {
				rs = append(rs, fmt.Sprintf(" %s=%d", o, n))
			}
		}
		fmt.Fprintf(&out, "renewals:%s\n", strings.Join(rs, ""))
		fmt.Fprintf(&out, "ticks=%d overruns=%d coalesced=%d timeouts=%d cycles=%d cycle-time=%s backlog=%d warnings=%d\n",
			st.Ticks, st.Overruns, st.Coalesced, st.Timeouts, st.Cycles, st.CycleTime, st.Backlog, len(st.Warnings))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

// outcome is the outcome a report names; the names are the outcomes'
// String, as the stats print them.
func outcome(name string) (heartbeat.Outcome, bool) {
	for o := heartbeat.Error; o <= heartbeat.Superseded; o++ {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}

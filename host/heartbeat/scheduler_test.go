package heartbeat_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/heartbeat"
)

// epoch is where the scripts' time starts; script times are offsets from it.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// pulse is a fake heartbeat record.
type pulse struct {
	mu      sync.Mutex
	details []byte
	at      time.Time
	beats   uint64
}

func (p *pulse) Last() ([]byte, time.Time, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.details), p.at, p.beats
}

func (p *pulse) beat(at time.Time, details string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at, p.beats = at, p.beats+1
	if details != "" {
		p.details = []byte(details)
	}
}

// script runs a scheduler through commands, one per line, and returns the
// trace: each command echoed after "> ", then what it produced.
//
//	track ID KIND [ttl=D] [timeout=D] [nopulse]   KIND: activity|instance|lock
//	untrack ID
//	beat ID AT [DETAILS]                          the guest beats at AT
//	tick AT                                       AT is an offset from epoch
//	ticks FROM TO                                 every Tick; idle ones print nothing
//	report SEQ OUTCOME...                         one outcome per batch item
//	check | stats
//
// A renewal prints as ID, or ID[details] when its details changed.
func script(t *testing.T, cfg heartbeat.Config, cmds string) string {
	t.Helper()
	s, err := heartbeat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pulses := map[string]*pulse{}
	var out strings.Builder
	dur := func(v string) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("bad duration %q: %v", v, err)
		}
		return d
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
		r := s.Tick(epoch.Add(at))
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
	for line := range strings.SplitSeq(strings.TrimSpace(cmds), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		fmt.Fprintf(&out, "> %s\n", strings.Join(f, " "))
		switch f[0] {
		case "track":
			it := heartbeat.Item{ID: f[1]}
			switch f[2] {
			case "activity":
				it.Kind = heartbeat.Activity
			case "instance":
				it.Kind = heartbeat.InstanceLease
			case "lock":
				it.Kind = heartbeat.LockLease
			}
			withPulse := it.Kind == heartbeat.Activity
			for _, opt := range f[3:] {
				k, v, _ := strings.Cut(opt, "=")
				switch k {
				case "ttl":
					it.TTL = dur(v)
				case "timeout":
					it.HeartbeatTimeout = dur(v)
				case "nopulse":
					withPulse = false
				default:
					t.Fatalf("unknown option %q", opt)
				}
			}
			if withPulse {
				if pulses[it.ID] == nil {
					pulses[it.ID] = &pulse{at: epoch}
				}
				it.Pulse = pulses[it.ID]
			}
			ws, err := s.Track(it)
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
			warn(ws)
		case "untrack":
			fmt.Fprintf(&out, "tracked=%v\n", s.Untrack(f[1]))
		case "beat":
			details := ""
			if len(f) > 3 {
				details = f[3]
			}
			pulses[f[1]].beat(epoch.Add(dur(f[2])), details)
		case "tick":
			tick(dur(f[1]), "", true)
		case "ticks":
			for at := dur(f[1]); at <= dur(f[2]); at += s.Config().Tick {
				tick(at, "@"+at.String()+" ", false)
			}
		case "report":
			seq, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			var os []heartbeat.Outcome
			for _, v := range f[2:] {
				o, ok := outcomes[v]
				if !ok {
					t.Fatalf("unknown outcome %q", v)
				}
				os = append(os, o)
			}
			acts(s.Report(seq, os))
		case "check":
			warn(s.Check())
		case "stats":
			st := s.Stats()
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
			t.Fatalf("unknown command %q", line)
		}
	}
	return out.String()
}

var outcomes = map[string]heartbeat.Outcome{
	"ok": heartbeat.OK, "error": heartbeat.Error, "throttled": heartbeat.Throttled,
	"not-found": heartbeat.NotFound, "cancelled": heartbeat.Cancelled, "superseded": heartbeat.Superseded,
}

package heartbeat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/heartbeat"
)

// small is the configuration of most scripts: 2 items per tick, 10 ticks
// per cycle, capacity 20.
var small = heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 2, Cycle: time.Second, MaxRetries: 2}

// TestInteraction scripts the core step by step and compares the exact
// trace: batches, actions, warnings and metrics.
func TestInteraction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    heartbeat.Config
		script string
		want   string
	}{
		{
			name: "cycle-by-absolute-time",
			cfg:  small,
			script: `
# New items wait in the backup queue; the first tick starts a cycle. A cycle
# starts when Cycle has passed since the last one began, however many ticks
# came in between: regular ones, then irregular ones.
track a instance ttl=4s
track b instance ttl=4s
track c lock ttl=4s
tick 0s
report 1 ok ok
tick 100ms
report 2 ok
ticks 200ms 900ms
tick 999ms
tick 1.05s
report 3 ok ok
tick 1.3s
report 4 ok
tick 2.049s
tick 2.1s
stats
`,
			want: `
> track a instance ttl=4s
> track b instance ttl=4s
> track c lock ttl=4s
> tick 0s
renew#1 [a b] cycle
> report 1 ok ok
> tick 100ms
renew#2 [c]
> report 2 ok
> ticks 200ms 900ms
> tick 999ms
renew#0 []
> tick 1.05s
renew#3 [a b] cycle
> report 3 ok ok
> tick 1.3s
renew#4 [c] overrun
> report 4 ok
> tick 2.049s
renew#0 [] overrun
> tick 2.1s
renew#5 [a b] cycle
> stats
tracked=3 capacity=20 main=1 backup=0 inflight=2
renewals: ok=6
ticks=15 overruns=2 coalesced=0 timeouts=0 cycles=2 cycle-time=1.05s backlog=0 warnings=0
`,
		},
		{
			name: "cpu-stall-then-burst",
			cfg:  small,
			script: `
# The scheduler is starved from 100ms to 3s while guests keep beating. The
# late tick takes one batch and counts an overrun; the ticks queued during
# the stall are coalesced; no guest is timed out.
track a activity ttl=4s timeout=2.5s
track b activity ttl=4s timeout=2.5s
track c activity ttl=4s timeout=2.5s
track d activity ttl=4s timeout=2.5s
track e activity ttl=4s timeout=2.5s
tick 0s
report 1 ok ok
beat a 2.9s
beat b 2.9s
beat c 2.9s
beat d 2.9s
beat e 2.9s
tick 3s
tick 3.001s
tick 3.02s
report 2 ok ok
tick 3.1s
report 3 ok ok
tick 3.2s
report 4 ok
ticks 3.3s 3.9s
stats
`,
			want: `
> track a activity ttl=4s timeout=2.5s
> track b activity ttl=4s timeout=2.5s
> track c activity ttl=4s timeout=2.5s
> track d activity ttl=4s timeout=2.5s
> track e activity ttl=4s timeout=2.5s
> tick 0s
renew#1 [a b] cycle
> report 1 ok ok
> beat a 2.9s
> beat b 2.9s
> beat c 2.9s
> beat d 2.9s
> beat e 2.9s
> tick 3s
renew#2 [c d] cycle overrun
> tick 3.001s
renew#0 [] coalesced
> tick 3.02s
renew#0 [] coalesced
> report 2 ok ok
> tick 3.1s
renew#3 [e a]
> report 3 ok ok
> tick 3.2s
renew#4 [b]
> report 4 ok
> ticks 3.3s 3.9s
> stats
tracked=5 capacity=20 main=0 backup=5 inflight=0
renewals: ok=7
ticks=11 overruns=1 coalesced=2 timeouts=0 cycles=1 cycle-time=3s backlog=3 warnings=0
`,
		},
		{
			name: "throttled-back-to-front",
			cfg:  small,
			script: `
# Throttled items go back to the front of the main deque, in their order.
track a instance
track b instance
track c instance
track d instance
tick 0s
report 1 throttled throttled
tick 100ms
report 2 ok throttled
tick 200ms
report 3 ok ok
tick 300ms
report 4 ok
stats
`,
			want: `
> track a instance
> track b instance
> track c instance
> track d instance
> tick 0s
renew#1 [a b] cycle
> report 1 throttled throttled
> tick 100ms
renew#2 [a b]
> report 2 ok throttled
> tick 200ms
renew#3 [b c]
> report 3 ok ok
> tick 300ms
renew#4 [d]
> report 4 ok
> stats
tracked=4 capacity=20 main=0 backup=4 inflight=0
renewals: ok=4 throttled=3
ticks=4 overruns=0 coalesced=0 timeouts=0 cycles=0 cycle-time=0s backlog=0 warnings=0
`,
		},
		{
			name: "unknown-errors-retried-then-backup",
			cfg:  small,
			script: `
# An unclassified error goes to the back of the main deque; after
# MaxRetries (2) retries in the cycle the item waits for the next cycle,
# and its next cycle gets the retries again. A missing outcome is an error.
track a instance
track b instance
tick 0s
report 1 error ok
tick 100ms
report 2 error
tick 200ms
report 3
ticks 300ms 900ms
tick 1s
report 4 ok error
tick 1.1s
report 5 ok
ticks 1.2s 2s
stats
`,
			want: `
> track a instance
> track b instance
> tick 0s
renew#1 [a b] cycle
> report 1 error ok
> tick 100ms
renew#2 [a]
> report 2 error
> tick 200ms
renew#3 [a]
> report 3
> ticks 300ms 900ms
> tick 1s
renew#4 [b a] cycle
> report 4 ok error
> tick 1.1s
renew#5 [a]
> report 5 ok
> ticks 1.2s 2s
@2s renew#6 [b a] cycle
> stats
tracked=2 capacity=20 main=0 backup=0 inflight=2
renewals: error=4 ok=3
ticks=21 overruns=0 coalesced=0 timeouts=0 cycles=2 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "cancelled-activity",
			cfg:  small,
			script: `
# A renewal that finds the attempt cancelled, gone or superseded cancels
# the activity and drops the item.
track a activity ttl=4s timeout=10s
track b activity ttl=4s timeout=10s
track c activity ttl=4s timeout=10s
track d activity ttl=4s
tick 0s
report 1 cancelled ok
tick 100ms
report 2 not-found superseded
ticks 200ms 1s
report 3 ok
ticks 1.1s 2s
stats
`,
			want: `
> track a activity ttl=4s timeout=10s
> track b activity ttl=4s timeout=10s
> track c activity ttl=4s timeout=10s
> track d activity ttl=4s
> tick 0s
renew#1 [a b] cycle
> report 1 cancelled ok
action cancel-activity a (cancelled)
> tick 100ms
renew#2 [c d]
> report 2 not-found superseded
action cancel-activity c (not-found)
action cancel-activity d (superseded)
> ticks 200ms 1s
@1s renew#3 [b] cycle
> report 3 ok
> ticks 1.1s 2s
@2s renew#4 [b] cycle
> stats
tracked=1 capacity=20 main=0 backup=0 inflight=1
renewals: ok=2 not-found=1 cancelled=1 superseded=1
ticks=21 overruns=0 coalesced=0 timeouts=0 cycles=2 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "guest-stalls",
			cfg:  small,
			script: `
# The guest beats until 1.2s and stops; with a 2.5s heartbeat timeout the
# first visit after 3.7s times it out with its last details. Renewals carry
# the details when they changed since the last successful renewal.
track a activity ttl=4s timeout=2.5s
beat a 0s step-1
tick 0s
report 1 ok
beat a 1.2s step-2
ticks 100ms 1s
report 2 ok
ticks 1.1s 2s
report 3 ok
ticks 2.1s 3s
report 4 ok
ticks 3.1s 5s
stats
`,
			want: `
> track a activity ttl=4s timeout=2.5s
> beat a 0s step-1
> tick 0s
renew#1 [a[step-1]] cycle
> report 1 ok
> beat a 1.2s step-2
> ticks 100ms 1s
@1s renew#2 [a[step-2]] cycle
> report 2 ok
> ticks 1.1s 2s
@2s renew#3 [a] cycle
> report 3 ok
> ticks 2.1s 3s
@3s renew#4 [a] cycle
> report 4 ok
> ticks 3.1s 5s
@4s renew#0 [] cycle
action heartbeat-timeout a details="step-2"
@5s renew#0 [] cycle
> stats
tracked=0 capacity=20 main=0 backup=0 inflight=0
renewals: ok=4
ticks=51 overruns=0 coalesced=0 timeouts=1 cycles=5 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "guest-stalls-no-pulse",
			cfg:  small,
			script: `
# An activity without a heartbeat timeout, or without a pulse, is only
# renewed, however long its guest is silent.
track a activity ttl=4s
track b activity ttl=4s timeout=2.5s nopulse
tick 0s
report 1 ok ok
ticks 100ms 1s
report 2 ok ok
ticks 1.1s 10s
stats
`,
			want: `
> track a activity ttl=4s
> track b activity ttl=4s timeout=2.5s nopulse
> tick 0s
renew#1 [a b] cycle
> report 1 ok ok
> ticks 100ms 1s
@1s renew#2 [a b] cycle
> report 2 ok ok
> ticks 1.1s 10s
@2s renew#3 [a b] cycle
@3s renew#0 [] cycle
@4s renew#0 [] cycle
@5s renew#0 [] cycle
@6s renew#0 [] cycle
@7s renew#0 [] cycle
@8s renew#0 [] cycle
@9s renew#0 [] cycle
@10s renew#0 [] cycle
> stats
tracked=2 capacity=20 main=0 backup=0 inflight=2
renewals: ok=4
ticks=101 overruns=0 coalesced=0 timeouts=0 cycles=10 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "dead-node-leases",
			cfg:  small,
			script: `
# The node was paused past its lease TTL and recovery on another node took
# over: the store says superseded or not found, and the leases are lost.
track x instance ttl=4s
track y instance ttl=4s
track l lock ttl=4s
tick 0s
report 1 superseded not-found
tick 100ms
report 2 superseded
ticks 200ms 1s
stats
`,
			want: `
> track x instance ttl=4s
> track y instance ttl=4s
> track l lock ttl=4s
> tick 0s
renew#1 [x y] cycle
> report 1 superseded not-found
action lease-lost x (superseded)
action lease-lost y (not-found)
> tick 100ms
renew#2 [l]
> report 2 superseded
action lease-lost l (superseded)
> ticks 200ms 1s
@1s renew#0 [] cycle
> stats
tracked=0 capacity=20 main=0 backup=0 inflight=0
renewals: not-found=1 superseded=2
ticks=11 overruns=0 coalesced=0 timeouts=0 cycles=1 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "overlapping-ticks",
			cfg:  small,
			script: `
# Renewals in flight are not taken again by later ticks; re-tracking an item
# in flight does not queue it twice; unknown or repeated reports do nothing;
# items untracked while queued or in flight are forgotten.
track a instance
track b instance
track c instance
track d instance
track e instance
track f instance
tick 0s
tick 100ms
track a instance
tick 200ms
tick 300ms
report 2 ok ok
report 2 ok ok
report 9 ok
untrack b
report 1 throttled not-found
untrack e
untrack zz
tick 400ms
report 4 ok
report 3 ok ok
ticks 500ms 1s
stats
`,
			want: `
> track a instance
> track b instance
> track c instance
> track d instance
> track e instance
> track f instance
> tick 0s
renew#1 [a b] cycle
> tick 100ms
renew#2 [c d]
> track a instance
> tick 200ms
renew#3 [e f]
> tick 300ms
renew#0 []
> report 2 ok ok
> report 2 ok ok
> report 9 ok
> untrack b
tracked=true
> report 1 throttled not-found
> untrack e
tracked=true
> untrack zz
tracked=false
> tick 400ms
renew#4 [a]
> report 4 ok
> report 3 ok ok
> ticks 500ms 1s
@1s renew#5 [c d] cycle
> stats
tracked=4 capacity=20 main=2 backup=0 inflight=2
renewals: ok=5 throttled=1 not-found=1
ticks=11 overruns=0 coalesced=0 timeouts=0 cycles=1 cycle-time=1s backlog=0 warnings=0
`,
		},
		{
			name: "warnings",
			cfg:  heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 1, Cycle: 200 * time.Millisecond},
			script: `
# Capacity is 1 × 2 = 2 items; TTLs and timeouts must exceed two cycles
# (400ms).
track a instance ttl=401ms
track b activity ttl=400ms timeout=1s
track c activity ttl=1s timeout=300ms
check
untrack b
check
track b instance
track b instance ttl=1s
check
stats
`,
			want: `
> track a instance ttl=401ms
> track b activity ttl=400ms timeout=1s
warning short_timeout: heartbeat: activity "b": TTL 400ms does not exceed two cycles (400ms)
> track c activity ttl=1s timeout=300ms
warning short_timeout: heartbeat: activity "c": heartbeat timeout 300ms does not exceed two cycles (400ms)
warning over_capacity: heartbeat: 3 tracked items exceed the capacity of 2 (batch 1 × 2 ticks per cycle): items are renewed less than once per cycle
> check
warning over_capacity: heartbeat: 3 tracked items exceed the capacity of 2 (batch 1 × 2 ticks per cycle): items are renewed less than once per cycle
warning short_timeout: heartbeat: 2 tracked item(s) have a TTL or heartbeat timeout that does not exceed two cycles (400ms)
> untrack b
tracked=true
> check
warning short_timeout: heartbeat: 1 tracked item(s) have a TTL or heartbeat timeout that does not exceed two cycles (400ms)
> track b instance
warning over_capacity: heartbeat: 3 tracked items exceed the capacity of 2 (batch 1 × 2 ticks per cycle): items are renewed less than once per cycle
> track b instance ttl=1s
warning over_capacity: heartbeat: 3 tracked items exceed the capacity of 2 (batch 1 × 2 ticks per cycle): items are renewed less than once per cycle
> check
warning over_capacity: heartbeat: 3 tracked items exceed the capacity of 2 (batch 1 × 2 ticks per cycle): items are renewed less than once per cycle
warning short_timeout: heartbeat: 1 tracked item(s) have a TTL or heartbeat timeout that does not exceed two cycles (400ms)
> stats
tracked=3 capacity=2 main=0 backup=3 inflight=0
renewals:
ticks=0 overruns=0 coalesced=0 timeouts=0 cycles=0 cycle-time=0s backlog=0 warnings=2
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := script(t, tt.cfg, tt.script)
			if want := strings.TrimPrefix(tt.want, "\n"); got != want {
				t.Errorf("trace differs\n--- got ---\n%s--- want ---\n%s", got, want)
			}
		})
	}
}

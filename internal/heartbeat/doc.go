// Package heartbeat is the node's heartbeat scheduler (docs/architecture.md,
// "The engine"): it keeps alive every running activity attempt, every
// instance lease and every long-held lock of this node, and notices the
// guests that stopped heartbeating. There is one per node.
//
// It is built like etcd-io/raft. [Scheduler] is a deterministic core with
// no goroutines, clock or I/O: the time comes in as an argument to Tick,
// each activity's liveness through its [Pulse] (the in-memory record the
// guest's heartbeat call writes; *call.Heartbeat is one), and out come
// the batch to renew and the [Action]s for the engine. [Service] is the
// thin shell: a ticker from an injected [Clock], one pipelined round trip
// per batch through a [Renewer], outcomes reported back, actions handed to
// [Actions]. Tests script the core tick by tick with a fake clock.
//
// # How it works
//
// Items live in a main deque and a backup queue. Every Tick takes up to
// Batch items from the front of the main deque. An activity whose last sign
// of life is older than its heartbeat timeout (absolute times:
// now − last beat > timeout) becomes a heartbeat-timeout action — stop the
// guest, fail the attempt with its last details — and is dropped. The rest
// are one batch, renewed in one round trip, and stay "in flight" until
// their outcomes are reported:
//
//   - OK: to the backup queue.
//   - NotFound, Cancelled, Superseded: dropped, with a cancel-activity
//     action (attempts) or a lease-lost action (instance and lock leases).
//   - Throttled: back to the front of the main deque, in batch order.
//   - Error (anything else, and any outcome the Renewer left out): to the
//     back of the main deque with a retry counter; after MaxRetries retries
//     in the cycle, to the backup queue. The counter is reset on OK and when
//     the item goes to the backup queue, so every cycle gives an item
//     MaxRetries+1 sends.
//
// Every Cycle, measured from the absolute time the previous cycle began,
// the backup queue moves to the back of the main deque. Ticks may overlap —
// the shell starts a tick while earlier round trips are outstanding — and
// an item in flight is in neither queue, so it is never in two batches.
//
// # Starvation
//
// A tick that runs at least two intervals after the previous one (the
// process was starved, a GC or VM pause) takes one batch, like any tick,
// and is counted as an overrun; the batches it missed are not sent in a
// burst that would trip the backend's throttling. A tick less than half an
// interval after the previous one (ticks that queued up during the stall)
// is skipped and counted as coalesced. The cycle and the heartbeat timeouts
// compare absolute times, so a stall neither shortens nor lengthens them;
// Stats.CycleTime and Stats.Backlog show that the cycle ran late.
//
// # Capacity and the two-cycle rule
//
// Capacity = Batch × (Cycle ÷ Tick): the items that can be renewed once per
// cycle. An item renewed early in one cycle may be renewed next only late
// in the following one, so the gap between two renewals approaches two
// cycles: a lease TTL (or heartbeat timeout) that does not exceed two
// cycles can expire on a healthy node. Track warns about the item and about
// capacity; Check, at start-up, warns about all tracked items and capacity;
// CheckTTL checks the engine's configured TTLs. Warnings are returned as
// values (the shell logs them) and Stats exports the current ones.
//
// # Defaults
//
// Target: a dead node's work is picked up by another node within about 10
// seconds. Recovery latency ≈ lease TTL + recovery sweep interval, because
// a dead node's last renewal happened at most one TTL before its leases
// expire, and the sweep (store.ExpiredLeases) runs periodically. So:
//
//   - Tick 100ms: small, evenly spread round trips (10 per second) rather
//     than bursts; cheap to wake.
//   - Cycle 2s: every item is renewed and checked every ~2s. The engine's
//     lease TTL should then be 8s (4 cycles): 2 cycles for the worst-case
//     gap between renewals, 1 more for a renewal that used up its retries
//     and waits for the next cycle, and 2s of slack for a pause or a slow
//     backend. With a 1s recovery sweep a dead node's work moves in
//     ≈ 8s + 1s ≤ 10s.
//   - Batch 1000: capacity 1000 × 20 = 20,000 items per node, up to 10,000
//     renewals per second. A node with more raises Batch (BenchmarkTick uses
//     5,000 for 100,000 items).
//   - MaxRetries 3 (DefaultMaxRetries, which the host sets; the zero
//     Config retries none): a transient error gets four sends within the
//     cycle before the item waits a cycle, still well inside an 8s TTL.
//
// The trade-off: each item costs one store write per cycle (100,000 items
// at 2s is 50,000 writes/s), so a longer cycle costs less — but the TTL
// must grow with it (> 2 cycles, 4 recommended) and recovery is slower by
// as much. A shorter TTL recovers faster but turns one bad cycle plus a
// pause into a lost lease on a healthy node, which then stops its work (a
// false failover). Heartbeat timeouts are detected between the timeout and
// the timeout plus one cycle, so they too should exceed two cycles (4s).
//
// # Decisions
//
//   - A newly tracked item waits in the backup queue: it was just leased or
//     started, like an item just renewed. The first Tick starts a cycle, so
//     after a restart everything tracked is visited in the first cycle.
//   - Tracking an ID already tracked updates the item in place.
//   - The core reads an activity's Pulse once per visit and carries what it
//     read in the [Renewal] (Details, Beats, Changed), so the Renewer
//     persists the latest details with the renewal, and can skip writing
//     them when Changed is false, without reading the pulse again.
//   - Throttled does not consume retries: it says "later", not "failed".
//   - An item untracked while in flight is forgotten; its outcome is
//     counted in Stats but leads to no action.
//   - The shell gives each round trip a deadline of one cycle; one that
//     takes longer is an error and is retried.
package heartbeat

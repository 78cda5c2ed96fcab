package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/wI2L/jsondiff"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// Shadow runs (docs/replay.md, "Shadow runs"): a candidate module of a
// plugin replays the plugin's recorded attempts next to the versions that
// recorded them, before anyone uploads it.

// candidates counts the shadow runs and replays using each candidate
// module loaded without being stored, so that the last one to finish
// unloads it and none unloads it under another.
type candidates struct {
	mu    sync.Mutex
	users map[string]int
}

// loadCandidate loads wasm for a trial without storing it, and returns
// its module and the function that releases it: the last release of a
// version that no plugin keeps unloads it.
func (n *Node) loadCandidate(ctx context.Context, wasm []byte) (*plugins.Module, func(), error) {
	n.candidates.mu.Lock()
	defer n.candidates.mu.Unlock()
	m, err := n.rt.LoadUnstored(ctx, wasm)
	if err != nil {
		return nil, nil, err
	}
	if n.candidates.users == nil {
		n.candidates.users = make(map[string]int)
	}
	n.candidates.users[m.Version]++
	release := sync.OnceFunc(func() {
		n.candidates.mu.Lock()
		defer n.candidates.mu.Unlock()
		if n.candidates.users[m.Version]--; n.candidates.users[m.Version] > 0 {
			return
		}
		delete(n.candidates.users, m.Version)
		// A version some plugin keeps stays loaded: instances may run it.
		// The blob store is the authority on that; when it cannot say,
		// unloading is still safe (the next call loads it again).
		if stored, err := n.rt.Stored(context.WithoutCancel(ctx), m.Version); err == nil && stored {
			return
		}
		n.rt.Unload(context.WithoutCancel(ctx), m.Version)
	})
	return m, release, nil
}

// Shadow replays the recorded attempts of plugin's activities that q
// selects (q.Plugin is set to plugin; a zero q.Limit is
// weft.DefaultShadowAttempts), newest first, each twice on its tape:
// with the version that recorded it (the baseline) and with candidate, a
// module that is loaded without being stored. It reports for each how
// the candidate compares with the recording (weft.ReplayOutcome; a JSON
// Patch between the outputs when they differ) and how its guest work
// compares with the baseline's (weft.CompareSpeed).
//
// Errors are about the run, not the attempts: no such plugin
// (weft.ErrNotFound), a bad query (weft.ErrInvalid), a candidate module
// that does not load (plugins.ErrInvalid, as for an upload), ctx ending. An attempt that cannot be replayed
// — its tape does not decode, the candidate lacks its activity — is in
// the report as weft.ReplayNotRun with its reason.
func (n *Node) Shadow(ctx context.Context, plugin string, candidate []byte, q weft.TapeQuery) (*weft.ShadowReport, error) {
	start := time.Now()
	q.Plugin = plugin
	if q.Limit == 0 {
		q.Limit = weft.DefaultShadowAttempts
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	if _, err := n.store.GetPlugin(ctx, plugin); err != nil {
		return nil, fmt.Errorf("node: shadow run of plugin %s: %w", plugin, err)
	}
	m, release, err := n.loadCandidate(ctx, candidate)
	if err != nil {
		return nil, fmt.Errorf("node: shadow run of plugin %s: loading the candidate module: %w", plugin, err)
	}
	defer release()
	recs, err := n.store.FindTapes(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("node: shadow run of plugin %s: finding its tapes: %w", plugin, err)
	}

	rep := &weft.ShadowReport{Plugin: plugin, CandidateVersion: m.Version, Query: q, Attempts: make([]weft.ShadowAttempt, len(recs))}
	// Replays are CPU work that shares the machine with the node's
	// workers: half the cores, at least one.
	par := max(1, runtime.GOMAXPROCS(0)/2)
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range min(par, len(recs)) {
		wg.Go(func() {
			for i := range next {
				rep.Attempts[i] = n.shadowAttempt(ctx, m, recs[i])
			}
		})
	}
feed:
	for i := range recs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, a := range rep.Attempts {
		rep.Summary.Add(a)
		n.replayed(metrics.ReplayShadow, a.Outcome)
		n.replayed(metrics.ReplayBaseline, a.Baseline)
	}
	rep.Duration = time.Since(start)
	n.log.Info("shadow run", "plugin", plugin, "candidate", m.Version, "attempts", rep.Summary.Attempts,
		"same", rep.Summary.Outcomes[weft.ReplaySame], "slower", rep.Summary.Slower, "faster", rep.Summary.Faster, "duration", rep.Duration)
	return rep, nil
}

// shadowAttempt replays the attempt rec names with its recorded version
// and with the candidate m, and compares.
func (n *Node) shadowAttempt(ctx context.Context, m *plugins.Module, rec weft.TapeRecord) weft.ShadowAttempt {
	sa := weft.ShadowAttempt{
		Key: rec.Key, Workflow: rec.Workflow, Activity: rec.Activity, RecordedVersion: rec.PluginVersion,
		RecordedAt: rec.RecordedAt, Outcome: weft.ReplayNotRun, Baseline: weft.ReplayNotRun,
	}
	_, data, err := n.store.GetTape(ctx, rec.Key)
	if err != nil {
		sa.Error = fmt.Sprintf("reading the tape: %v", err)
		return sa
	}
	a, err := tape.UnmarshalAttempt(data)
	if err != nil {
		sa.Error = fmt.Sprintf("decoding the tape: %v", err)
		return sa
	}
	if !m.Has(a.Activity) {
		sa.Error = fmt.Sprintf("the candidate module has no activity %q", a.Activity)
		return sa
	}
	timeout := n.activityTimeout()
	discard := func(call.Record) {}
	// The baseline first: its module may have to be read from the blob
	// store, and an attempt whose tape does not replay on its own version
	// says so before the candidate is judged on it.
	if _, err := n.rt.Module(ctx, a.PluginVersion); err != nil {
		sa.Error = fmt.Sprintf("loading the recorded version %s for the baseline: %v", a.PluginVersion, err)
	} else if base, err := Replay(ctx, n.rt, a.PluginVersion, a, rec.Key, timeout, discard); err != nil {
		sa.Error = fmt.Sprintf("replaying the recorded version: %v", err)
	} else {
		sa.Baseline, sa.BaselineFuel, sa.BaselineDuration = base.Outcome, base.Fuel, base.Duration
	}
	r, err := Replay(ctx, n.rt, m.Version, a, rec.Key, timeout, discard)
	if err != nil {
		sa.Error = fmt.Sprintf("replaying the candidate: %v", err)
		return sa
	}
	sa.Outcome, sa.Fuel, sa.Duration = r.Outcome, r.Fuel, r.Duration
	sa.RecordedOutput, sa.Output = r.RecordedOutput, r.Output
	sa.RecordedFailure, sa.Failure, sa.Divergence = r.RecordedFailure, r.Failure, r.Divergence
	if sa.Baseline != weft.ReplayNotRun {
		sa.Speed = weft.CompareSpeed(sa.Fuel, sa.BaselineFuel)
	}
	if sa.Outcome == weft.ReplayDifferentOutput && sa.RecordedOutput != nil && sa.Output != nil {
		patch, err := outputDiff(sa.RecordedOutput, sa.Output)
		switch {
		case err != nil:
			sa.Error = fmt.Sprintf("comparing the outputs: %v", err)
		case patch == nil:
			// The same document in other bytes (key order, spacing): what
			// the next step reads is the same.
			sa.Outcome = weft.ReplaySame
		default:
			sa.Diff = patch
		}
	}
	boundOutputs(&sa)
	return sa
}

// boundOutputs leaves out of sa the outputs and the diff larger than
// weft.MaxShadowOutput, and says so.
func boundOutputs(sa *weft.ShadowAttempt) {
	for _, doc := range []*json.RawMessage{&sa.RecordedOutput, &sa.Output, &sa.Diff} {
		if len(*doc) > weft.MaxShadowOutput {
			*doc, sa.OutputsOmitted = nil, true
		}
	}
}

// outputDiff is the JSON Patch (RFC 6902) that turns the document from
// into to, nil when they are the same document.
func outputDiff(from, to json.RawMessage) (json.RawMessage, error) {
	if bytes.Equal(from, to) {
		return nil, nil
	}
	patch, err := jsondiff.CompareJSON(from, to)
	if err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, nil
	}
	return json.Marshal(patch)
}

// replayed counts a replay in the metrics, when the node keeps them.
func (n *Node) replayed(kind string, outcome weft.ReplayOutcome) {
	if n.metrics != nil {
		n.metrics.Replayed(kind, outcome)
	}
}

// activityTimeout is the engine's activity timeout, under which replays
// run.
func (n *Node) activityTimeout() time.Duration {
	if t := n.cfg.Engine.ActivityTimeout; t > 0 {
		return t
	}
	return definition.DefaultActivityTimeout
}

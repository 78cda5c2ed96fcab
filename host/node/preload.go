package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// topicPlugin is the bus topic on which the node that stored a plugin
// version announces it, so that every node loads (compiles) it before its
// first call instead of during it. A topic names one kind of notification
// for the whole cluster; the engine's are "inbox" and "changed".
const topicPlugin = "plugin"

// announcement is the payload of topicPlugin.
type announcement struct {
	Plugin  string `json:"plugin"`
	Version string `json:"version"`
}

// nonTerminal are the statuses of the instances that pin plugin versions
// (weft.Status.Terminal): a paused instance goes on when resumed, with the
// versions it started with.
var nonTerminal = [...]weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusSuspended, weft.StatusPaused}

// background runs the node's background loads: an announced version is
// loaded on a goroutine of its own, a bounded number at a time, until
// Close.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	// slots bounds the loads in progress, at start and in the background.
	slots chan struct{}

	mu          sync.Mutex
	closed      bool
	wg          sync.WaitGroup
	unsubscribe func()
}

// announce tells every node of the cluster that version of plugin name is
// stored. A lost announcement costs only latency: a node that misses it
// loads the version on its first call or at its next start.
func (n *Node) announce(ctx context.Context, name, version string) {
	if n.bus == nil {
		return // one node: it loaded the version while storing it
	}
	payload, err := json.Marshal(announcement{Plugin: name, Version: version})
	if err != nil {
		n.log.Warn("announcing a stored plugin version", "plugin", name, "version", version, "err", err)
		return
	}
	// Stored is stored: the caller leaving does not take the announcement
	// back.
	if err := n.bus.Publish(context.WithoutCancel(ctx), topicPlugin, payload); err != nil {
		n.log.Warn("announcing a stored plugin version; other nodes will load it on first use",
			"plugin", name, "version", version, "err", err)
	}
}

// listen subscribes to the announcements of stored plugin versions, when
// the node has a bus.
func (n *Node) listen(ctx context.Context) error {
	if n.bus == nil {
		return nil
	}
	unsubscribe, err := n.bus.Subscribe(ctx, topicPlugin, n.announced)
	if err != nil {
		return fmt.Errorf("node: subscribing to %s: %w", topicPlugin, err)
	}
	n.bg.mu.Lock()
	n.bg.unsubscribe = unsubscribe
	n.bg.mu.Unlock()
	return nil
}

// announced is called on the bus's goroutine, which it must not hold: the
// load runs on a goroutine of its own.
func (n *Node) announced(payload []byte) {
	var a announcement
	if err := json.Unmarshal(payload, &a); err != nil || a.Version == "" {
		n.log.Warn("ignoring a malformed plugin announcement", "payload", string(payload), "err", err)
		return
	}
	n.bg.mu.Lock()
	defer n.bg.mu.Unlock()
	if n.bg.closed {
		return
	}
	n.bg.wg.Add(1)
	go func() {
		defer n.bg.wg.Done()
		if n.metrics != nil {
			// Another node stored it: name it in this node's metrics too.
			n.metrics.TrackPlugin(a.Plugin, a.Version)
		}
		ctx := n.bg.ctx
		if err := n.bg.acquire(ctx); err != nil {
			return // closing
		}
		defer n.bg.release()
		// Concurrent loads of one version, this one and a call's, are one
		// load; a loaded version returns at once (the uploader's).
		if _, err := n.rt.Module(ctx, a.Version); err != nil && ctx.Err() == nil {
			n.log.Error("announced plugin version cannot be loaded; its calls will try again",
				"plugin", a.Plugin, "version", a.Version, "err", err)
		}
	}()
}

// acquire takes one of the load slots, or returns ctx.Err() when ctx ends
// first; release gives it back.
func (b *background) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *background) release() { <-b.slots }

// stopBackground unsubscribes, stops the loads that wait for a slot and
// waits for those in progress.
func (n *Node) stopBackground() {
	n.bg.mu.Lock()
	n.bg.closed = true
	unsubscribe := n.bg.unsubscribe
	n.bg.mu.Unlock()
	if unsubscribe != nil {
		unsubscribe()
	}
	if n.bg.cancel != nil {
		n.bg.cancel()
	}
	n.bg.wg.Wait()
}

// warmUp is the loading of the stored plugins that Open starts in the
// background.
type warmUp struct {
	done chan struct{} // closed when every version was tried, or at Close

	mu             sync.Mutex
	loaded, failed int
	total          int
}

// err is nil once the warm-up ended, else ErrWarming with its progress.
func (w *warmUp) err() error {
	select {
	case <-w.done:
		return nil
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Errorf("node: %w: %d of %d loaded", ErrWarming, w.loaded+w.failed, w.total)
}

// Warmed is closed once the node has tried to load every version Open
// found stored (the current one of each plugin and those that unfinished
// instances pin), or when it closes.
func (n *Node) Warmed() <-chan struct{} { return n.warm.done }

// startWarmUp lists what the warm-up loads (a store that cannot be listed
// fails it, and Open) and starts loading it in the background, one version
// at a time: a call that needs a version loads it on its own, and waits
// for no more than the one compile under way (MaxCompiles is one by
// default). The versions that unfinished instances pin come first, as
// they are the ones with work waiting. It names every stored version for
// the metrics. A version that cannot be loaded is logged and skipped.
func (n *Node) startWarmUp(ctx context.Context) error {
	n.warm.done = make(chan struct{})
	versions, err := n.storedVersions(ctx)
	if err != nil {
		close(n.warm.done)
		return err
	}
	n.warm.total = len(versions)
	if len(versions) == 0 {
		close(n.warm.done) // ready at once: nothing to wait for
		return nil
	}
	n.bg.mu.Lock()
	defer n.bg.mu.Unlock()
	n.bg.wg.Add(1)
	go func() {
		defer n.bg.wg.Done()
		defer close(n.warm.done)
		n.warmUp(n.bg.ctx, versions)
	}()
	return nil
}

// warmUp loads versions in order until they are all tried or ctx ends.
func (n *Node) warmUp(ctx context.Context, versions []storedVersion) {
	start := n.now()
	for _, v := range versions {
		if ctx.Err() != nil {
			return // closing
		}
		_, err := n.rt.Module(ctx, v.version)
		if err != nil && ctx.Err() != nil {
			return
		}
		if err != nil {
			n.log.Error("stored plugin cannot be loaded; its activities will fail until it is uploaded again",
				"plugin", v.name, "version", v.version, "err", err)
		}
		n.warm.mu.Lock()
		if err != nil {
			n.warm.failed++
		} else {
			n.warm.loaded++
		}
		n.warm.mu.Unlock()
	}
	n.warm.mu.Lock()
	loaded, failed := n.warm.loaded, n.warm.failed
	n.warm.mu.Unlock()
	if loaded+failed > 0 {
		n.log.Info("loaded stored plugins", "count", loaded, "failed", failed, "took", n.now().Sub(start).Round(time.Millisecond))
	}
}

// storedVersion is a version the warm-up loads.
type storedVersion struct{ version, name string }

// storedVersions returns every version the warm-up loads, once each: those
// pinned by unfinished instances, then the current ones.
func (n *Node) storedVersions(ctx context.Context) ([]storedVersion, error) {
	var out []storedVersion
	names := map[string]string{}
	add := func(version, name string) {
		if _, ok := names[version]; !ok {
			names[version] = name
			out = append(out, storedVersion{version: version, name: name})
		}
	}
	for _, status := range nonTerminal {
		f := weft.InstanceFilter{Status: status, Limit: weft.MaxListLimit}
		for {
			insts, next, err := n.store.ListInstances(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("node: listing %s instances: %w", status, err)
			}
			for _, inst := range insts {
				for name, version := range inst.Plugins {
					add(version, name)
				}
			}
			if next == "" {
				break
			}
			f.Cursor = next
		}
	}
	for cursor := ""; ; {
		recs, next, err := n.store.ListPlugins(ctx, cursor, weft.MaxListLimit)
		if err != nil {
			return nil, fmt.Errorf("node: listing stored plugins: %w", err)
		}
		for _, rec := range recs {
			add(rec.Version, rec.Name)
			if n.metrics == nil {
				continue
			}
			p, err := n.store.GetPlugin(ctx, rec.Name)
			switch {
			case errors.Is(err, weft.ErrNotFound):
				continue // deleted since it was listed
			case err != nil:
				return nil, fmt.Errorf("node: reading plugin %s: %w", rec.Name, err)
			}
			for _, v := range p.Versions {
				n.metrics.TrackPlugin(v.Name, v.Version)
			}
			n.metrics.TrackPlugin(rec.Name, rec.Version)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}

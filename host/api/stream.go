package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/weft"
)

// Event streams: server-sent events of instance changes, for the console
// and any client that follows instances without polling
// (docs/http-api.md, "Event streams").

const (
	// streamBatch bounds the instances one flush of the list stream
	// reads: more changes than that at once are told as one resync,
	// which tells the client to read the list again.
	streamBatch = 100
	// streamCoalesce is how long the list stream gathers changes before
	// it reads them, so that an instance's burst of commits is read once.
	streamCoalesce = 100 * time.Millisecond
)

// The names of the events a stream sends.
const (
	sseInstance = "instance" // data: an instance as answered
	sseDeleted  = "deleted"  // data: {"id": …}
	sseResync   = "resync"   // data: {}; read the list again
)

// changeSet gathers the instance ids the engine reports changed until a
// stream's writer takes them.
type changeSet struct {
	mu    sync.Mutex
	ids   map[string]struct{}
	over  bool          // more than streamBatch since the last take
	ready chan struct{} // has a value when ids or over has news
}

func newChangeSet() *changeSet {
	return &changeSet{ids: map[string]struct{}{}, ready: make(chan struct{}, 1)}
}

// add notes id; it never blocks (the engine calls it while committing).
func (cs *changeSet) add(id string) {
	cs.mu.Lock()
	_, known := cs.ids[id]
	switch {
	case cs.over, known:
	case len(cs.ids) >= streamBatch:
		cs.over = true
		clear(cs.ids)
	default:
		cs.ids[id] = struct{}{}
	}
	cs.mu.Unlock()
	select {
	case cs.ready <- struct{}{}:
	default:
	}
}

// take returns the ids noted since the last take, sorted, or over.
func (cs *changeSet) take() (ids []string, over bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ids, over = slices.Sorted(maps.Keys(cs.ids)), cs.over
	clear(cs.ids)
	cs.over = false
	return ids, over
}

// sseWriter writes server-sent events. Each write moves the connection's
// write deadline on by timeout: a stream must make progress, not end,
// within WriteTimeout.
type sseWriter struct {
	w       *bufio.Writer
	conn    net.Conn
	timeout time.Duration
}

// event writes one event whose data is v as JSON (one line: JSON escapes
// line breaks) and flushes it.
func (w *sseWriter) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	return w.w.Flush()
}

// comment writes a comment line, which clients ignore: a keep-alive, and
// the way a writer finds that its client has gone.
func (w *sseWriter) comment(text string) error {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w.w, ": %s\n\n", text); err != nil {
		return err
	}
	return w.w.Flush()
}

// openStream takes a place for a stream, or answers 503 when MaxStreams
// are open.
func (s *Server) openStream() (release func(), err error) {
	select {
	case s.streams <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-s.streams }) }, nil
	default:
		return nil, problemf(fiber.StatusServiceUnavailable, "unavailable", "the host has %d event streams open, its limit (http.max_streams); close one or try later", cap(s.streams))
	}
}

// startStream sets a stream's headers and hands its writing to follow,
// which runs after the handler has returned, until the client goes, the
// server shuts down or follow returns. A HEAD gets the headers only.
func (s *Server) startStream(c *fiber.Ctx, follow func(w *sseWriter)) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	// Proxies such as nginx buffer answers unless told not to.
	c.Set("X-Accel-Buffering", "no")
	if c.Method() == fiber.MethodHead {
		return nil
	}
	release, err := s.openStream()
	if err != nil {
		return err
	}
	w := &sseWriter{conn: c.Context().Conn(), timeout: s.cfg.WriteTimeout}
	log := s.logger(c)
	c.Context().SetBodyStreamWriter(func(bw *bufio.Writer) {
		defer release()
		// fasthttp runs this on a goroutine of its own, beyond the recover
		// middleware: a panic here would end the process.
		defer func() {
			if r := recover(); r != nil {
				log.Error("event stream panicked", "panic", r)
			}
		}()
		w.w = bw
		follow(w)
	})
	return nil
}

// streamInstances answers GET /v1/streams/instances: an event per
// instance that changes (of one workflow with ?workflow=).
func (s *Server) streamInstances(c *fiber.Ctx) error {
	wf := c.Query("workflow")
	log := s.logger(c)
	return s.startStream(c, func(w *sseWriter) {
		cs := newChangeSet()
		stop := s.node.OnChange(cs.add)
		defer stop()
		// An error is most often the client's leaving, and ends the
		// stream either way.
		if err := s.followInstances(w, cs, wf); err != nil {
			log.Debug("instance stream ended", "err", err)
		}
	})
}

// followInstances writes the list stream until an error or shutdown.
func (s *Server) followInstances(w *sseWriter, cs *changeSet, wf string) error {
	if err := w.comment("instance changes"); err != nil {
		return err
	}
	// In a cluster the engine is not told of every change: the stream
	// also compares the counts by status from time to time and tells a
	// resync when they moved.
	complete := s.node.ChangesComplete()
	var counts map[weft.Status]int
	if !complete {
		counts, _ = s.counts(wf) // a failed read just makes the next look a resync
	}
	poll := time.NewTicker(s.cfg.StreamPoll)
	defer poll.Stop()
	for {
		select {
		case <-s.draining:
			return nil
		case <-poll.C:
			if !complete {
				now, err := s.counts(wf)
				if err == nil && !maps.Equal(now, counts) {
					counts = now
					if err := w.event(sseResync, struct{}{}); err != nil {
						return err
					}
					continue
				}
			}
			if err := w.comment("keep-alive"); err != nil {
				return err
			}
		case <-cs.ready:
			t := time.NewTimer(streamCoalesce)
			select {
			case <-s.draining:
				t.Stop()
				return nil
			case <-t.C:
			}
			ids, over := cs.take()
			if over {
				if err := w.event(sseResync, struct{}{}); err != nil {
					return err
				}
				continue
			}
			if err := s.sendChanged(w, ids, wf); err != nil {
				return err
			}
		}
	}
}

// sendChanged writes an event for each instance of ids (of workflow wf,
// when not empty).
func (s *Server) sendChanged(w *sseWriter, ids []string, wf string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	for _, id := range ids {
		in, err := s.node.Instance(ctx, id)
		switch {
		case errors.Is(err, weft.ErrNotFound):
			if err := w.event(sseDeleted, map[string]string{"id": id}); err != nil {
				return err
			}
			continue
		case err != nil:
			// The client reads the list again rather than miss a change.
			return w.event(sseResync, struct{}{})
		case wf != "" && in.Workflow != wf:
			continue
		}
		v := viewInstance(in)
		if in.Status == weft.StatusSuspended {
			if v, err = s.withWaiting(ctx, in); err != nil {
				return w.event(sseResync, struct{}{})
			}
		}
		if err := w.event(sseInstance, v); err != nil {
			return err
		}
	}
	return nil
}

// counts reads the counts by status for a stream.
func (s *Server) counts(wf string) (map[weft.Status]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	return s.node.CountInstances(ctx, wf)
}

// streamInstance answers GET /v1/instances/{id}/stream: the instance at
// once, again at each change, until it has finished (or is deleted).
func (s *Server) streamInstance(c *fiber.Ctx) error {
	id := param(c, "id")
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.instance(ctx, id); err != nil {
		return err // a 404 before the stream starts
	}
	log := s.logger(c)
	return s.startStream(c, func(w *sseWriter) {
		cs := newChangeSet()
		stop := s.node.OnChange(func(changed string) {
			if changed == id {
				cs.add(changed)
			}
		})
		defer stop()
		if err := s.followInstance(w, cs, id); err != nil {
			log.Debug("instance stream ended", "instance", id, "err", err)
		}
	})
}

// followInstance writes one instance's stream until it ends.
func (s *Server) followInstance(w *sseWriter, cs *changeSet, id string) error {
	var rev uint64
	send := func() (done bool, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		in, err := s.node.Instance(ctx, id)
		if errors.Is(err, weft.ErrNotFound) {
			return true, w.event(sseDeleted, map[string]string{"id": id})
		}
		if err != nil {
			// Not the end: the next change or poll tries again.
			return false, w.comment("the store could not be read; trying again")
		}
		if in.Rev == rev {
			return false, w.comment("keep-alive")
		}
		rev = in.Rev
		v, err := s.detail(ctx, in)
		if err != nil {
			return false, w.comment("the store could not be read; trying again")
		}
		return in.Status.Terminal(), w.event(sseInstance, v)
	}
	poll := time.NewTicker(s.cfg.StreamPoll)
	defer poll.Stop()
	for {
		done, err := send()
		if done || err != nil {
			return err
		}
		select {
		case <-s.draining:
			return nil
		case <-poll.C:
		case <-cs.ready:
			cs.take()
		}
	}
}

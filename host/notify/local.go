package notify

import (
	"context"
	"sync"
	"sync/atomic"
)

// localBacklog bounds the notifications waiting for the Local bus's
// goroutine; beyond it Publish drops (at most once, as over Redis).
const localBacklog = 4096

// Local is the in-process bus of embedded mode. It is safe for concurrent
// use. Close it when done: it runs a goroutine.
type Local struct {
	mu      sync.Mutex
	subs    subscribers
	backlog []note
	wake    chan struct{} // holds a token when backlog may be non-empty
	closed  bool
	done    chan struct{}
	stopped chan struct{}
	dropped atomic.Uint64
}

type note struct {
	topic   string
	payload []byte
}

// NewLocal returns an in-process bus.
func NewLocal() *Local {
	l := &Local{wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go l.run()
	return l
}

// Publish hands payload to the subscribers of topic, on the bus's
// goroutine; it does not wait for them. When more than 4096 notifications
// are waiting it drops this one and counts it in Dropped.
func (l *Local) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := checkTopic("publish", topic); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if len(l.backlog) >= localBacklog {
		l.dropped.Add(1)
		return nil
	}
	l.backlog = append(l.backlog, note{topic, append([]byte(nil), payload...)})
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// Subscribe calls fn with every payload published on topic from now on,
// until unsubscribe is called. Unsubscribing twice is harmless.
func (l *Local) Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (unsubscribe func(), err error) {
	if err := checkTopic("subscribe", topic); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	id, _ := l.subs.add(topic, fn)
	return func() {
		l.mu.Lock()
		l.subs.remove(topic, id)
		l.mu.Unlock()
	}, nil
}

// Dropped returns how many notifications Publish dropped because the
// subscribers were too slow.
func (l *Local) Dropped() uint64 { return l.dropped.Load() }

// Close stops the bus; notifications not yet delivered are dropped.
// Closing twice does nothing.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	<-l.stopped
	return nil
}

func (l *Local) run() {
	defer close(l.stopped)
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
		}
		for {
			l.mu.Lock()
			if l.closed || len(l.backlog) == 0 {
				l.mu.Unlock()
				break
			}
			n := l.backlog[0]
			l.backlog[0] = note{}
			l.backlog = l.backlog[1:]
			l.mu.Unlock()
			dispatch(&l.mu, &l.subs, n.topic, n.payload)
		}
	}
}

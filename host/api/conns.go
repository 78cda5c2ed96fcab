package api

import (
	"net"
	"sync"
	"sync/atomic"
)

// silentConns tracks the server's connections that have not sent a byte
// yet, so that Shutdown can close them. fasthttp marks a new connection
// active before it reads its first request, and its shutdown waits for
// active connections: one a client opened and never used (net/http's
// Transport dials ahead of need and parks the spare connection) held
// Shutdown until the read timeout, two minutes by default. A connection
// that sent nothing has no request to drain; one that sent part of a
// request is drained like any other.
type silentConns struct {
	mu    sync.Mutex
	conns map[*heardConn]struct{}
}

// heardConn is a connection that notes its first byte read.
type heardConn struct {
	net.Conn
	heard  atomic.Bool
	silent *silentConns
}

func (c *heardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.heard.Load() {
		c.heard.Store(true)
		c.silent.forget(c)
	}
	return n, err
}

// NetConn returns the connection underneath, as tls.Conn's does: what
// watchHangUp watches.
func (c *heardConn) NetConn() net.Conn { return c.Conn }

func (c *heardConn) Close() error {
	c.silent.forget(c)
	return c.Conn.Close()
}

func (s *silentConns) forget(c *heardConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// closeAll closes the connections that have sent nothing yet.
func (s *silentConns) closeAll() {
	s.mu.Lock()
	conns := make([]*heardConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if !c.heard.Load() {
			_ = c.Conn.Close() // the server's read then fails and it lets the connection go
			s.forget(c)
		}
	}
}

// silentListener wraps the server's listener so that its connections are
// tracked until they send their first byte.
type silentListener struct {
	net.Listener
	silent *silentConns
}

func (l silentListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	hc := &heardConn{Conn: c, silent: l.silent}
	l.silent.mu.Lock()
	if l.silent.conns == nil {
		l.silent.conns = map[*heardConn]struct{}{}
	}
	l.silent.conns[hc] = struct{}{}
	l.silent.mu.Unlock()
	return hc, nil
}

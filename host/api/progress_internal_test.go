package api

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	mu        sync.Mutex
	deadlines []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadlines = append(c.deadlines, t)
	return nil
}

// TestProgressReader: every chunk read for the connection moves its write
// deadline to a timeout from then, so that a stream must make progress
// rather than end within one timeout; abort ends the stream and the write
// in progress at once.
func TestProgressReader(t *testing.T) {
	t.Parallel()
	const timeout = time.Hour
	pr, pw := io.Pipe()
	conn := &deadlineConn{}
	p := &progressReader{r: pr, conn: conn, timeout: timeout}
	go func() {
		for range 3 {
			if _, err := pw.Write([]byte("chunk")); err != nil {
				return
			}
		}
		_ = pw.Close() // always nil
	}()
	buf := make([]byte, 64)
	for i := range 3 {
		before := time.Now()
		n, err := p.Read(buf)
		if err != nil || n != len("chunk") {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		conn.mu.Lock()
		got := len(conn.deadlines)
		last := conn.deadlines[got-1]
		conn.mu.Unlock()
		if got != i+1 || last.Before(before.Add(timeout)) {
			t.Fatalf("after read %d: %d deadlines, the last %s; want one a timeout from the read", i, got, last)
		}
	}
	if n, err := p.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("the end: %d bytes, %v", n, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	pr, pw = io.Pipe()
	conn = &deadlineConn{}
	p = &progressReader{r: pr, conn: conn, timeout: timeout}
	wrote := make(chan error, 1)
	go func() {
		_, err := pw.Write([]byte("never read"))
		wrote <- err
	}()
	before := time.Now()
	p.abort(errShuttingDown)
	if err := <-wrote; !errors.Is(err, errShuttingDown) {
		t.Errorf("the writer after abort: %v", err)
	}
	if _, err := p.Read(buf); err == nil {
		t.Error("a read after abort succeeded")
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if len(conn.deadlines) != 1 || conn.deadlines[0].After(before.Add(time.Minute)) {
		t.Errorf("deadlines after abort: %v; want one, now", conn.deadlines)
	}
}

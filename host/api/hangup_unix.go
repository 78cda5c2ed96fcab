//go:build unix

package api

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// watchHangUp reports when the client at the other end of conn hangs up
// while a handler waits: the channel it returns is closed then. fasthttp
// does not read a connection while its handler runs, so nothing else
// would notice: the handler would hold its goroutine and its engine wait
// for the rest of a ?wait= of up to apiv1.MaxWait.
//
// The watch peeks (MSG_PEEK) at the socket when the poller says it is
// readable, so it consumes nothing fasthttp will read next. End of stream
// or a reset is a hang-up, as net/http also takes it; bytes (a pipelined
// request) say nothing either way, and the watch stops there, leaving the
// wait bounded by its duration. A connection without a file descriptor
// (none in this server) is not watched.
//
// stop ends the watch and must be called before the handler returns; it
// clears conn's read deadline, which fasthttp sets again before it reads
// the next request.
func watchHangUp(conn net.Conn) (gone <-chan struct{}, stop func()) {
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = nc.NetConn() // TLS: the socket underneath
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	// fasthttp's read timeout (set when the request was read) would end
	// the watch before a long wait ends.
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return nil, func() {}
	}
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var hungUp bool
		var buf [1]byte
		// Read calls the function again when the socket becomes
		// readable, as long as it returns false; a deadline ends it
		// with an error, which is how stop wakes it.
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK)
				switch {
				case errors.Is(err, syscall.EINTR):
					continue
				case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
					return false
				case err != nil:
					hungUp = true // reset, or another error of a dead socket
				default:
					hungUp = n == 0 // end of stream
				}
				return true
			}
		})
		if err == nil && hungUp {
			close(ch)
		}
	}()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			_ = conn.SetReadDeadline(time.Now())
			<-done
			_ = conn.SetReadDeadline(time.Time{})
		})
	}
}

//go:build !unix

package api

import "net"

// watchHangUp does not watch on systems without MSG_PEEK through the
// syscall package (Windows, wasip1): a wait there ends when its duration
// does, or at Shutdown, even after the client hung up. See the unix
// version.
func watchHangUp(net.Conn) (gone <-chan struct{}, stop func()) {
	return nil, func() {}
}

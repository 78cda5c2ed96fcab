package api

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
)

// errShuttingDown cuts a backup off when the server shuts down.
var errShuttingDown = errors.New("the host is shutting down")

// backup streams a backup of the embedded store (GET /v1/admin/backup):
// the store as it was when the request arrived, a bbolt file of exactly
// Content-Length bytes. A backup that fails or is cut off once streaming
// ends the connection short of Content-Length, which a client sees as an
// incomplete answer; the status line was sent already. HEAD answers the
// size.
func (s *Server) backup(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	b, err := s.node.Backup(ctx)
	if err != nil {
		return err
	}
	size := b.Size()
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="weft.db"`)
	c.Set(fiber.HeaderCacheControl, "no-store")
	if c.Method() == fiber.MethodHead {
		c.Response().Header.SetContentLength(int(size))
		return b.Close()
	}
	// Copied to a file beside the store first, so that a client reading
	// slowly never holds the store's writers back (see embedded.Backup).
	if err := b.Spool(); err != nil {
		return errors.Join(err, b.Close())
	}
	log := s.logger(c)
	start := time.Now()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := b.WriteTo(pw)
		err = errors.Join(err, b.Close())
		// nil: the reader gets EOF after the last byte.
		_ = pw.CloseWithError(err) // always nil
		switch {
		case err == nil:
			log.Info("backup taken", "bytes", n, "took", time.Since(start).Round(time.Millisecond))
		case errors.Is(err, io.ErrClosedPipe), errors.Is(err, errShuttingDown):
			log.Warn("backup cut off: the client went away, stopped reading or the host shut down", "bytes", n, "of", size, "err", err)
		default:
			log.Error("backup failed", "bytes", n, "of", size, "err", err)
		}
	}()
	stream := &progressReader{r: pr, conn: c.Context().Conn(), timeout: s.cfg.WriteTimeout}
	// A shutdown does not wait for a backup, which would hold the store
	// open: it is cut off, to be taken again from the next host.
	go func() {
		select {
		case <-s.draining:
			stream.abort(errShuttingDown)
		case <-done:
		}
	}()
	c.Context().SetBodyStream(stream, int(size))
	return nil
}

// progressReader is a streamed answer that must make progress every
// timeout rather than be written whole within it, as other answers are
// (WriteTimeout): each chunk the server reads from it to write moves the
// connection's write deadline on. So a backup of any size gets through a
// slow link, and a client that stops reading is still disconnected.
type progressReader struct {
	r       *io.PipeReader
	conn    net.Conn
	timeout time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		if derr := p.conn.SetWriteDeadline(time.Now().Add(p.timeout)); derr != nil {
			// The connection is gone: end the answer there.
			return n, derr
		}
	}
	return n, err
}

// Close closes the stream; the server calls it when the answer is
// written, or abandoned.
func (p *progressReader) Close() error { return p.r.Close() }

// abort ends the answer with err: the next read fails, and a write
// blocked on a client that does not read fails at once.
func (p *progressReader) abort(err error) {
	_ = p.r.CloseWithError(err) // always nil
	// An error here is a connection closed already: nothing to end.
	_ = p.conn.SetWriteDeadline(time.Now())
}

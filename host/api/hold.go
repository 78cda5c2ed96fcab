package api

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
)

// holdRequest returns the context of a request that may run up to d,
// longer than RequestTimeout (a ?wait=, a shadow run): it ends after d,
// when Shutdown starts, so that the client gets an answer at once
// instead of holding the shutdown, or when the client hangs up (hangUp is
// closed then: there is no one to answer). done must be called before
// the handler returns.
func (s *Server) holdRequest(c *fiber.Ctx, d time.Duration) (ctx context.Context, hangUp <-chan struct{}, done func()) {
	ctx, cancel := context.WithTimeout(c.UserContext(), d)
	hangUp, unwatch := watchHangUp(c.Context().Conn())
	go func() {
		select {
		case <-s.draining:
			cancel()
		case <-hangUp:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, hangUp, func() {
		unwatch()
		cancel()
	}
}

package api

import "github.com/gofiber/fiber/v2"

// App returns the Fiber application, for tests that list its routes or
// call it without a listener.
func (s *Server) App() *fiber.App { return s.app }

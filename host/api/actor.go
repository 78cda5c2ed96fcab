package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/weft"
)

// Who makes a change through the API: the schedules' records and the
// history entries of operator actions on instances (docs/operations.md,
// "Audit") name the request's token.

// actor names who makes a request's change: its token's name, or
// weft.ActorAnonymous on a host without tokens, where a request names no
// one.
func actor(c *fiber.Ctx) string {
	if cred, _ := c.Locals(localCred).(*credential); cred != nil {
		return cred.name
	}
	return weft.ActorAnonymous
}

// operation is a request's action on an instance as the engine records
// it: who asked (actor), why, and when the request came.
func operation(c *fiber.Ctx, reason string) weft.Operation {
	return weft.Operation{Actor: actor(c), Reason: reason, At: time.Now()}
}

// role is the request's token's role: what it may do, beyond its route's
// least role (a batch's operation), decided by the handler. On a host
// without tokens every request is an admin's.
func role(c *fiber.Ctx) Role {
	if cred, _ := c.Locals(localCred).(*credential); cred != nil {
		return cred.role
	}
	return RoleAdmin
}

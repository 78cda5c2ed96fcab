package api

import (
	"fmt"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/weft"
)

// TestStoreErrorsAsProblems: a store that cannot be reached is a 503 the
// client may retry, not an internal error; a stale grants edit is a 412.
func TestStoreErrorsAsProblems(t *testing.T) {
	for _, tt := range []struct {
		err    error
		status int
		slug   string
	}{
		{fmt.Errorf("redisstore: get instance %q on 127.0.0.1:1: %w: dial tcp: connection refused", "i", weft.ErrUnavailable), fiber.StatusServiceUnavailable, "unavailable"},
		{&weft.GrantsConflictError{Plugin: "pay", Want: 1, Stored: 2}, fiber.StatusPreconditionFailed, "precondition-failed"},
		{fmt.Errorf("boom"), fiber.StatusInternalServerError, "internal"},
	} {
		p, _ := problemFor(tt.err)
		if p.Status != tt.status || p.Type != problemTypePrefix+tt.slug {
			t.Errorf("problemFor(%v) = %d %s, want %d %s", tt.err, p.Status, p.Type, tt.status, tt.slug)
		}
	}
}

// TestCleanDropsPackagePrefixesWhole: the packages' prefixes leave a
// problem's detail as whole words; a prefix inside another word stays.
func TestCleanDropsPackagePrefixesWhole(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`redisstore: get instance "i" on 127.0.0.1:1: store unavailable`, `get instance "i" on 127.0.0.1:1: store unavailable`},
		{`engine: committing instance x: store: instance "x": stale revision`, `committing instance x: instance "x": stale revision`},
		{`node: opening the store: embedded: open weft.db: timeout`, `opening the store: open weft.db: timeout`},
		{`mystore: kept`, `mystore: kept`},
		{`engine: engine: twice`, `twice`},
		{`no prefix`, `no prefix`},
	} {
		if got := clean(fmt.Errorf("%s", tt.in)); got != tt.want {
			t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

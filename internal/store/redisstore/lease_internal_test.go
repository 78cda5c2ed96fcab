package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
)

// encodeLease is the scripts' lease function, in Go, for the fuzz target.
func encodeLease(l weft.Lease, terminal bool) string {
	term := "0"
	if terminal {
		term = "1"
	}
	return hexTime(l.Expiry) + term + strconv.Itoa(len(l.Boot)) + ":" + l.Boot + l.Node
}

// FuzzParseLease: a value of the l hash decodes without a panic, to a
// lease with a node, and a lease encoded as the scripts do decodes to
// itself whatever bytes its node and boot hold.
func FuzzParseLease(f *testing.F) {
	f.Add("8000000000000000" + "0" + "2:b1n1")
	f.Add("ffffffffffffffff1" + "0:node")
	f.Add("0000000000000000012:12:boot:e:xnode:7:")
	f.Add("800000000000000003:ab")
	f.Fuzz(func(t *testing.T, v string) {
		if l, err := parseLease(v); err == nil && l.Node == "" {
			t.Fatalf("parseLease(%q) = %+v without a node", v, l)
		}
		if len(v) < 2 {
			return
		}
		// Split the input into a node and a boot for the round trip.
		cut := int(v[0]) % len(v)
		l := weft.Lease{Node: v[cut:], Boot: v[:cut], Expiry: time.Unix(0, int64(len(v))*1_000_003).UTC()}
		got, err := parseLease(encodeLease(l, v[0]%2 == 0))
		if err != nil || got != l {
			t.Fatalf("lease %+v decodes to %+v, %v", l, got, err)
		}
	})
}

// TestUnavailable: a refused connection is the server's unavailability; a
// command the server refuses is not.
func TestUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	refused := c.Do(t.Context(), "NOSUCHCOMMAND").Err()
	if refused == nil || unavailable(refused) {
		t.Errorf("unavailable(%v) = true for a command the server refused", refused)
	}
	srv.Stop(t)
	down := c.Get(t.Context(), "k").Err()
	if down == nil || !unavailable(down) {
		t.Errorf("unavailable(%v) = false with the server stopped", down)
	}
}

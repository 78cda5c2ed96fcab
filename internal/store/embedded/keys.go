package embedded

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/tuple"
)

// Composite keys are tuples in internal/store/tuple's order-preserving
// encoding; key appends their components. Buckets keyed by one name or id
// use the raw bytes.
type key []byte

func (k key) str(s string) key                    { return tuple.AppendString(k, s) }
func (k key) time(t time.Time) key                { return tuple.AppendTime(k, t) }
func (k key) u64(v uint64) key                    { return tuple.AppendUint64(k, v) }
func readStr(b []byte) (string, []byte, bool)     { return tuple.ReadString(b) }
func readTime(b []byte) (time.Time, []byte, bool) { return tuple.ReadTime(b) }

// cursor codes are the base64 (URL, unpadded) of a key suffix: opaque to
// clients, exact for seeking.
func encodeCursor(k []byte) string { return base64.RawURLEncoding.EncodeToString(k) }

func decodeCursor(c string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) == 0 {
		return nil, store.Invalid("bad cursor %q", c)
	}
	return b, nil
}

// hasPrefix is bytes.HasPrefix for keys that may be nil (end of bucket).
func hasPrefix(k, prefix []byte) bool { return k != nil && bytes.HasPrefix(k, prefix) }

// keyIDs returns the instance ids that the keys of b start with (as a
// tuple string), each once, in order: b's keys are (id, ...).
func keyIDs(b kvBucket) ([]string, error) {
	var ids []string
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		id, _, ok := readStr(k)
		if !ok {
			return nil, fmt.Errorf("corrupt key %x: it does not start with an instance id", k)
		}
		if n := len(ids); n == 0 || ids[n-1] != id {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

package boltstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/weftworks/weft/host/store"
)

// Composite keys are tuples encoded so that byte order is tuple order and
// no component is a prefix of another:
//
//   - a string is escaped (0x00 becomes 0x00 0xFF) and terminated by
//     0x00 0x01;
//   - a time is its Unix nanoseconds as 8 big-endian bytes with the sign
//     bit flipped;
//   - a number is 8 big-endian bytes.
//
// Buckets keyed by one name or id use the raw bytes.
type key []byte

func (k key) str(s string) key {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			k = append(k, 0, 0xFF)
		} else {
			k = append(k, s[i])
		}
	}
	return append(k, 0, 1)
}

func (k key) time(t time.Time) key {
	return binary.BigEndian.AppendUint64(k, uint64(t.UnixNano())^(1<<63))
}

func (k key) u64(v uint64) key { return binary.BigEndian.AppendUint64(k, v) }

// readStr decodes a string component at the front of b.
func readStr(b []byte) (s string, rest []byte, ok bool) {
	var out []byte
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		switch b[i+1] {
		case 1:
			out = append(out, b[:i]...)
			return string(out), b[i+2:], true
		case 0xFF:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, false
		}
	}
	return "", nil, false
}

// readTime decodes a time component at the front of b.
func readTime(b []byte) (t time.Time, rest []byte, ok bool) {
	if len(b) < 8 {
		return time.Time{}, nil, false
	}
	n := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
	return time.Unix(0, n).UTC(), b[8:], true
}

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

// Package partition maps ids to the partitions of the Redis layout that
// spreads a store over the masters of a Redis Cluster (docs/cluster.md,
// "Partitions"), and names each partition's hash tag so that the
// partitions spread evenly over the masters. It is a pure core: it
// imports no Redis client, and the cluster's own hash function is
// restated here (Slot) so that a tag's slot is known without a server.
package partition

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Max bounds the number of partitions (and of queue or bus shards): far
// more than a cluster has masters, and few enough that Tags, whose search
// grows with the square of the number, takes milliseconds (about half a
// second at Max).
const Max = 1024

// Of returns the partition of id among n (n ≥ 1): FNV-1a of the id, so
// that it needs no lookup and every node computes the same.
func Of(id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id)) // a hash.Hash never fails a Write
	return int(h.Sum64() % uint64(n))
}

// Slot is the hash slot Redis Cluster gives key: CRC16 (XMODEM) of its
// hash tag (what is between the first "{" and the next "}", when that is
// not empty) or of the whole key, modulo Slots.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis
// Cluster's keyHashSlot computes it.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Tags returns the hash tags of n partitions of the keys under prefix,
// "{" + prefix + i + "~" + s + "}": partition i's tag has the first suffix
// s whose slot falls in the i-th of n equal ranges of the slots. A
// cluster created by redis-cli gives each master one contiguous range of
// slots, so the partitions spread over the masters as evenly as n allows.
// The tags depend on prefix and n alone: every node computes the same.
func Tags(prefix string, n int) ([]string, error) {
	if n < 1 || n > Max {
		return nil, fmt.Errorf("partition: %d partitions: the number must be from 1 to %d", n, Max)
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("partition: prefix %q must not contain '{' or '}'", prefix)
	}
	tags := make([]string, n)
	for i := range n {
		lo, hi := i*Slots/n, (i+1)*Slots/n
		for s := 0; ; s++ {
			tag := "{" + prefix + strconv.Itoa(i) + "~" + strconv.Itoa(s) + "}"
			if slot := Slot(tag); slot >= lo && slot < hi {
				tags[i] = tag
				break
			}
		}
	}
	return tags, nil
}

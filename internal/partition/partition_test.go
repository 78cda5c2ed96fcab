package partition_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/partition"
)

// TestSlot checks Slot against the slots Redis itself gives (CLUSTER
// KEYSLOT on redis-server 7.0, and the cluster spec's example).
func TestSlot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"123456789", 12739}, // the spec's CRC16 check value 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},    // an empty tag: the whole key
		{"foo{{bar}}zap", 4015}, // the tag is "{bar"
		{"foo{bar}{zap}", 5061}, // the first tag: "bar"
		{"{weft:}schema", 9610}, // the store's tag today (CLUSTER KEYSLOT)
		{"", 0},
	} {
		if got := partition.Slot(tt.key); got != tt.slot {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
}

// TestOf: ids spread over the partitions, and one partition holds all.
func TestOf(t *testing.T) {
	t.Parallel()
	const n, ids = 64, 64_000
	counts := make([]int, n)
	for i := range ids {
		p := partition.Of(fmt.Sprintf("instance-%d", i), n)
		if p < 0 || p >= n {
			t.Fatalf("Of = %d, outside [0, %d)", p, n)
		}
		counts[p]++
	}
	for p, c := range counts {
		// 1,000 expected each; 5 standard deviations (about 160) apart.
		if c < 800 || c > 1200 {
			t.Errorf("partition %d holds %d of %d ids, want about %d", p, c, ids, ids/n)
		}
	}
	for _, n := range []int{0, 1} {
		if got := partition.Of("x", n); got != 0 {
			t.Errorf("Of(x, %d) = %d, want 0", n, got)
		}
	}
	// Pinned: a store's instances stay where these put them, so Of must
	// never change (FNV-1a 64, computed apart from this package).
	for _, tt := range []struct {
		id     string
		n, got int
	}{
		{"same", 64, 27}, {"instance-1", 64, 52}, {"01HZX3", 64, 5}, {"schedule:s1:20261129T090000Z", 64, 2},
		{"same", 3, 0}, {"01HZX3", 3, 1},
	} {
		if got := partition.Of(tt.id, tt.n); got != tt.got {
			t.Errorf("Of(%q, %d) = %d, want %d", tt.id, tt.n, got, tt.got)
		}
	}
}

// TestTags: each partition's tag falls in its range of slots, so that
// masters holding equal ranges hold equal numbers of partitions.
func TestTags(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 16, 64, 1000} {
		tags, err := partition.Tags("weft:", n)
		if err != nil {
			t.Fatal(err)
		}
		if len(tags) != n {
			t.Fatalf("%d tags for %d partitions", len(tags), n)
		}
		seen := map[string]bool{}
		for i, tag := range tags {
			lo, hi := i*partition.Slots/n, (i+1)*partition.Slots/n
			if s := partition.Slot(tag + "i:x"); s < lo || s >= hi {
				t.Errorf("n=%d: tag %d %q has slot %d, outside [%d, %d)", n, i, tag, s, lo, hi)
			}
			if seen[tag] {
				t.Errorf("n=%d: tag %q twice", n, tag)
			}
			seen[tag] = true
		}
		// Three masters of equal ranges hold n/3 partitions each, give or
		// take the one a range boundary splits.
		perMaster := make([]int, 3)
		for _, tag := range tags {
			perMaster[partition.Slot(tag)*3/partition.Slots]++
		}
		for m, c := range perMaster {
			if c < n/3-1 || c > n/3+1 {
				t.Errorf("n=%d: master %d holds %d partitions, want %d±1", n, m, c, n/3)
			}
		}
	}
	again, _ := partition.Tags("weft:", 64)
	first, _ := partition.Tags("weft:", 64)
	if fmt.Sprint(again) != fmt.Sprint(first) {
		t.Error("Tags is not a function of prefix and n")
	}
	for _, tt := range []struct {
		prefix string
		n      int
		want   string
	}{
		{"weft:", 0, "from 1 to 1024"},
		{"weft:", partition.Max + 1, "from 1 to 1024"},
		{"a{b", 4, `"a{b"`},
	} {
		if _, err := partition.Tags(tt.prefix, tt.n); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Tags(%q, %d): %v, want an error with %q", tt.prefix, tt.n, err, tt.want)
		}
	}
}

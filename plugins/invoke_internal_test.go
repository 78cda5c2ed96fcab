package plugins

import "testing"

func TestNearLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		size, limit uint64
		want        bool
	}{
		{size: 64 << 10, limit: 1 << 20, want: false},       // 1 MiB cap, a fresh 1-page guest
		{size: 1<<20 - 32<<10, limit: 1 << 20, want: true},  // within 64 KiB of 1 MiB
		{size: 200 << 20, limit: 256 << 20, want: false},    // 56 MiB left
		{size: 255<<20 + 1, limit: 256 << 20, want: true},   // within 1 MiB
		{size: 256 << 20, limit: 256 << 20, want: true},     // at the cap
		{size: 0, limit: 4 << 30, want: false},              // 4 GiB cap: no overflow
		{size: 4<<30 - 512<<10, limit: 4 << 30, want: true}, // within 1 MiB of 4 GiB
	}
	for _, tt := range tests {
		if got := nearLimit(tt.size, tt.limit); got != tt.want {
			t.Errorf("nearLimit(%d, %d) = %v, want %v", tt.size, tt.limit, got, tt.want)
		}
	}
}

package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s               weft.Status
		valid, terminal bool
	}{
		{weft.StatusPending, true, false},
		{weft.StatusRunning, true, false},
		{weft.StatusSuspended, true, false},
		{weft.StatusCompleted, true, true},
		{weft.StatusFailed, true, true},
		{weft.StatusCancelled, true, true},
		{"", false, false},
		{"Running", false, false},
	}
	for _, tt := range tests {
		if tt.s.Valid() != tt.valid || tt.s.Terminal() != tt.terminal {
			t.Errorf("%q: Valid, Terminal = %v, %v, want %v, %v", tt.s, tt.s.Valid(), tt.s.Terminal(), tt.valid, tt.terminal)
		}
	}
}

func TestLease(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name                   string
		l                      weft.Lease
		zero, held, expiredNow bool
	}{
		{"zero", weft.Lease{}, true, false, false},
		{"live", weft.Lease{Node: "n", Boot: "b", Expiry: now.Add(time.Second)}, false, true, false},
		{"expires now", weft.Lease{Node: "n", Boot: "b", Expiry: now}, false, true, true},
		{"other boot", weft.Lease{Node: "n", Boot: "c", Expiry: now.Add(-time.Second)}, false, false, true},
	}
	for _, tt := range tests {
		if tt.l.IsZero() != tt.zero || tt.l.Held("n", "b") != tt.held || tt.l.Expired(now) != tt.expiredNow {
			t.Errorf("%s: IsZero, Held, Expired = %v, %v, %v", tt.name, tt.l.IsZero(), tt.l.Held("n", "b"), tt.l.Expired(now))
		}
	}
	if (weft.Lease{}).Held("", "") {
		t.Error("an empty lease is held by the empty node")
	}
}

func TestClampLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{-1: weft.DefaultListLimit, 0: weft.DefaultListLimit, 1: 1, 1000: 1000, 1001: weft.MaxListLimit} {
		if got := weft.ClampLimit(in); got != want {
			t.Errorf("ClampLimit(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		target error
		text   string
	}{
		{&store.CommitError{InstanceID: "i", Err: weft.ErrConflict, Rev: 4, Fence: 9}, weft.ErrConflict, `store: instance "i": stale revision (stored rev 4, fence 9)`},
		{&store.CommitError{InstanceID: "i", Err: weft.ErrFenced, Rev: 4, Fence: 9}, weft.ErrFenced, "fence 9"},
		{&store.CommitError{InstanceID: "i", Err: weft.ErrNotFound}, weft.ErrNotFound, `store: instance "i": not found`},
		{&store.CommitError{InstanceID: "i", Err: store.ErrNotQueued, Stimulus: "s"}, store.ErrNotQueued, `stimulus not queued: "s"`},
		{&weft.InUseError{Plugin: "p", Instances: []string{"a", "b"}}, weft.ErrInUse, `plugin "p" in use by instance(s) a, b`},
		{store.Invalid("field %s", "x"), weft.ErrInvalid, "store: invalid argument: field x"},
		{store.NotFound("definition %q", "d"), weft.ErrNotFound, `store: definition "d": not found`},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.target) {
			t.Errorf("%v does not match %v", tt.err, tt.target)
		}
		if !strings.Contains(tt.err.Error(), tt.text) {
			t.Errorf("%q does not contain %q", tt.err.Error(), tt.text)
		}
	}
}

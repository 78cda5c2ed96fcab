package weft_test

import (
	"errors"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

func TestCompareSpeed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		candidate, baseline uint64
		want                weft.ShadowSpeed
	}{
		{0, 5000, weft.ShadowSpeedUnknown},
		{5000, 0, weft.ShadowSpeedUnknown},
		{5000, 5000, weft.ShadowAlike},
		{10, 100, weft.ShadowAlike},           // under the floor
		{100_000, 100_999, weft.ShadowAlike},  // under the floor
		{110_000, 100_000, weft.ShadowAlike},  // at the margin
		{110_001, 100_000, weft.ShadowSlower}, // past it
		{100_000, 110_001, weft.ShadowFaster},
		{1_000, 200_000, weft.ShadowFaster},
		{200_000, 1_000, weft.ShadowSlower},
	} {
		if got := weft.CompareSpeed(tc.candidate, tc.baseline); got != tc.want {
			t.Errorf("CompareSpeed(%d, %d) = %q, want %q", tc.candidate, tc.baseline, got, tc.want)
		}
	}
}

func TestShadowSummaryAdd(t *testing.T) {
	t.Parallel()
	var s weft.ShadowSummary
	for _, a := range []weft.ShadowAttempt{
		{Outcome: weft.ReplaySame, Speed: weft.ShadowAlike, Fuel: 10, BaselineFuel: 10},
		{Outcome: weft.ReplaySame, Speed: weft.ShadowSlower, Fuel: 300, BaselineFuel: 100},
		{Outcome: weft.ReplayDiverged, Fuel: 7, BaselineFuel: 100},
		{Outcome: weft.ReplayNotRun},
		{Outcome: weft.ReplayFailed, Speed: weft.ShadowFaster, Fuel: 1, BaselineFuel: 50},
	} {
		s.Add(a)
	}
	if s.Attempts != 5 || s.Outcomes[weft.ReplaySame] != 2 || s.Outcomes[weft.ReplayDiverged] != 1 || s.Outcomes[weft.ReplayNotRun] != 1 ||
		s.Slower != 1 || s.Faster != 1 || s.Alike != 1 || s.Fuel != 311 || s.BaselineFuel != 160 {
		t.Errorf("summary %+v", s)
	}
}

func TestTapeQueryCheck(t *testing.T) {
	t.Parallel()
	for _, q := range []weft.TapeQuery{{Limit: 1}, {Plugin: "p"}, {Plugin: "p", Limit: weft.MaxShadowAttempts + 1}} {
		if err := q.Check(); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
	if err := (weft.TapeQuery{Plugin: "p", Limit: weft.MaxShadowAttempts}).Check(); err != nil {
		t.Error(err)
	}
}

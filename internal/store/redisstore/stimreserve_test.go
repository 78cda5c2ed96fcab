package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// csExpiry is when the stimuli of the reservation tests expire.
var csExpiry = storetest.Epoch.Add(time.Hour)

// csReserveFor is how long a reservation of these tests lasts.
const csReserveFor = 30 * time.Second

// csStep is one call on a reserved stimulus, made at Epoch + at.
type csStep struct {
	op     string // reserve, confirm, release, expire
	inst   string
	at     time.Duration
	want   error // nil, store.ErrNotQueued or errNotReserved
	killed int   // expire: how many stimuli it moves to the dead letters
}

func (st csStep) run(t *testing.T, s *Store, sid string) {
	t.Helper()
	ctx := t.Context()
	at := storetest.Epoch.Add(st.at)
	var err error
	switch st.op {
	case "reserve":
		err = s.reserveStimulus(ctx, sid, st.inst, at, at.Add(csReserveFor))
	case "confirm":
		err = s.confirmStimulus(ctx, sid, st.inst, []byte(`{"by": "`+st.inst+`"}`), at)
	case "release":
		err = s.releaseStimulus(ctx, sid, st.inst)
	case "expire":
		var dead []weft.Stimulus
		dead, err = s.ExpireStimuli(ctx, at, 100)
		if err == nil && len(dead) != st.killed {
			t.Errorf("expire at +%s: %d dead, want %d", st.at, len(dead), st.killed)
		}
	default:
		t.Fatalf("unknown step %q", st.op)
	}
	switch {
	case st.want == nil && err != nil:
		t.Fatalf("%s by %q at +%s: %v", st.op, st.inst, st.at, err)
	case st.want != nil && !errors.Is(err, st.want):
		t.Fatalf("%s by %q at +%s: %v, want an error matching %v", st.op, st.inst, st.at, err, st.want)
	case st.want != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", sid)):
		t.Errorf("%s by %q at +%s: %v does not name stimulus %q", st.op, st.inst, st.at, err, sid)
	}
	var ce *store.CommitError
	if errors.Is(st.want, store.ErrNotQueued) && (!errors.As(err, &ce) || ce.Stimulus != sid || ce.InstanceID != st.inst) {
		t.Errorf("%s by %q: %#v, want a *store.CommitError of the instance and the stimulus, as Commit's", st.op, st.inst, err)
	}
}

// A reservation takes a queued stimulus out of the queue and the expiry
// index without settling it; a confirmation settles it as the commit that
// consumes it would, a release puts it back; both are idempotent, and
// neither touches a stimulus reserved for another instance. While
// reserved, a stimulus is neither listed as pending or queued nor
// expired; after a release it is both again, and dies at the next
// expiry.
func TestStimulusReservation(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	r, cf, rl := "reserve", "confirm", "release"
	tests := []struct {
		name     string
		absent   bool // the stimulus is never enqueued
		steps    []csStep
		state    weft.StimulusState // "" for none stored
		to       string
		listed   bool   // by PendingStimuli and QueuedStimuli
		reserved string // the instance holding it, "" for none
	}{
		{name: "reserved", steps: []csStep{{op: r, inst: "a"}},
			state: weft.StimulusQueued, reserved: "a"},
		{name: "confirmed", steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "a", at: time.Second}},
			state: weft.StimulusDelivered, to: "a"},
		{name: "confirmed twice", steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "a"}, {op: cf, inst: "a", at: time.Minute}},
			state: weft.StimulusDelivered, to: "a"},
		{name: "confirmed after its deadline (the sweep)", steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "a", at: 5 * time.Minute}},
			state: weft.StimulusDelivered, to: "a"},
		{name: "released", steps: []csStep{{op: r, inst: "a"}, {op: rl, inst: "a"}},
			state: weft.StimulusQueued, listed: true},
		{name: "released twice", steps: []csStep{{op: r, inst: "a"}, {op: rl, inst: "a"}, {op: rl, inst: "a"}},
			state: weft.StimulusQueued, listed: true},
		{name: "released then reserved by another", steps: []csStep{{op: r, inst: "a"}, {op: rl, inst: "a"}, {op: r, inst: "b"}},
			state: weft.StimulusQueued, reserved: "b"},
		{name: "a release after the confirmation leaves it delivered",
			steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "a"}, {op: rl, inst: "a"}},
			state: weft.StimulusDelivered, to: "a"},
		{name: "a confirmation after the release is refused",
			steps: []csStep{{op: r, inst: "a"}, {op: rl, inst: "a"}, {op: cf, inst: "a", want: errNotReserved}},
			state: weft.StimulusQueued, listed: true},
		{name: "reserved once only",
			steps: []csStep{{op: r, inst: "a"}, {op: r, inst: "b", want: store.ErrNotQueued}, {op: r, inst: "a", want: store.ErrNotQueued}},
			state: weft.StimulusQueued, reserved: "a"},
		{name: "another instance neither confirms nor releases",
			steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "b", want: errNotReserved}, {op: rl, inst: "b"}},
			state: weft.StimulusQueued, reserved: "a"},
		{name: "a delivered stimulus is not reserved",
			steps: []csStep{{op: r, inst: "a"}, {op: cf, inst: "a"}, {op: r, inst: "b", want: store.ErrNotQueued}},
			state: weft.StimulusDelivered, to: "a"},
		{name: "an unknown stimulus is not reserved", absent: true,
			steps: []csStep{{op: r, inst: "a", want: store.ErrNotQueued}, {op: cf, inst: "a", want: errNotReserved}}},
		{name: "an expired stimulus is not reserved",
			steps: []csStep{{op: r, inst: "a", at: time.Hour, want: store.ErrNotQueued}},
			state: weft.StimulusQueued, listed: true},
		{name: "not expired while reserved, dead once released",
			steps: []csStep{{op: r, inst: "a"}, {op: "expire", at: 2 * time.Hour}, {op: rl, inst: "a"}, {op: "expire", at: 2 * time.Hour, killed: 1}},
			state: weft.StimulusDead},
		{name: "confirmed after it expired while reserved",
			steps: []csStep{{op: r, inst: "a"}, {op: "expire", at: 2 * time.Hour}, {op: cf, inst: "a", at: 2 * time.Hour}},
			state: weft.StimulusDelivered, to: "a"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := csOpen(t, c, fmt.Sprintf("{t:reserve-%d}", i), roleCatalog, clock.Now, 0)
			const sid = "s1"
			if !tt.absent {
				if _, err := s.EnqueueStimulus(ctx, weft.Stimulus{ID: sid, Name: "sig", Key: "k", ExpiresAt: csExpiry}); err != nil {
					t.Fatal(err)
				}
			}
			for _, st := range tt.steps {
				st.run(t, s, sid)
			}
			got, err := s.GetStimulus(ctx, sid)
			switch {
			case tt.state == "" && !errors.Is(err, weft.ErrNotFound):
				t.Errorf("GetStimulus: %+v, %v; want not found", got, err)
			case tt.state != "" && err != nil:
				t.Fatal(err)
			case tt.state != "" && (got.State != tt.state || got.DeliveredTo != tt.to):
				t.Errorf("stimulus: state %s to %q, want %s to %q", got.State, got.DeliveredTo, tt.state, tt.to)
			}
			pending, err := s.PendingStimuli(ctx, "sig", "k")
			if err != nil {
				t.Fatal(err)
			}
			queued, _, err := s.QueuedStimuli(ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if (len(pending) == 1) != tt.listed || (len(queued) == 1) != tt.listed || len(pending) > 1 || len(queued) > 1 {
				t.Errorf("pending %v, queued %v; want listed %v", pending, queued, tt.listed)
			}
			res, err := s.expiredReservations(ctx, storetest.Epoch.Add(24*time.Hour), 10)
			if err != nil {
				t.Fatal(err)
			}
			var want []reservation
			if tt.reserved != "" {
				want = []reservation{{Stimulus: sid, Instance: tt.reserved, Deadline: csReservedUntil(t, s, sid)}}
			}
			if !csSameReservations(res, want) {
				t.Errorf("reservations %+v, want %+v", res, want)
			}
		})
	}
}

// csReservedUntil reads the deadline of the reservation of stimulus sid
// from its rv field in store s.
func csReservedUntil(t *testing.T, s *Store, sid string) time.Time {
	t.Helper()
	rv, err := s.c.HGet(t.Context(), s.p+"s:"+sid, "rv").Result()
	if err != nil || len(rv) < 16 {
		t.Fatalf("rv of stimulus %s: %q, %v", sid, rv, err)
	}
	d, err := parseHexTime(rv[:16])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// csSameReservations reports whether a and b list the same reservations
// (deadlines compared as instants).
func csSameReservations(a, b []reservation) bool {
	return slices.EqualFunc(a, b, func(x, y reservation) bool {
		return x.Stimulus == y.Stimulus && x.Instance == y.Instance && x.Deadline.Equal(y.Deadline)
	})
}

// A confirmation writes what a commit consuming the stimulus writes: its
// settlement time and outcome, and its forget time, the later of the
// retention's end and the stimulus's expiry; the forget sweep then
// removes it as any delivered stimulus.
func TestConfirmStimulusSettles(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	at := storetest.Epoch.Add(time.Minute)
	tests := []struct {
		name      string
		retention time.Duration
		forget    time.Time
	}{
		{"retention past the expiry", 24 * time.Hour, at.Add(24 * time.Hour)},
		{"expiry past the retention", time.Minute, csExpiry},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := csOpen(t, c, fmt.Sprintf("{t:settle-%d}", i), roleCatalog, clock.Now, tt.retention)
			if _, err := s.EnqueueStimulus(ctx, weft.Stimulus{ID: "s1", Name: "sig", ExpiresAt: csExpiry}); err != nil {
				t.Fatal(err)
			}
			if err := s.reserveStimulus(ctx, "s1", "a", storetest.Epoch, storetest.Epoch.Add(csReserveFor)); err != nil {
				t.Fatal(err)
			}
			if err := s.confirmStimulus(ctx, "s1", "a", []byte(`{ "ok" : 1 }`), at); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetStimulus(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if !got.SettledAt.Equal(at) || string(got.Outcome) != `{"ok":1}` || got.DeliveredTo != "a" {
				t.Errorf("confirmed: settled %s, outcome %s, to %q; want %s, {\"ok\":1}, a", got.SettledAt, got.Outcome, got.DeliveredTo, at)
			}
			f, err := s.c.HMGet(ctx, s.p+"s:s1", "qm", "rv").Result()
			if err != nil || f[0] != nil || f[1] != nil {
				t.Errorf("qm and rv after the confirmation: %v, %v; want none", f, err)
			}
			sf, err := s.c.ZRange(ctx, s.p+"sf", 0, -1).Result()
			if err != nil || !slices.Equal(sf, []string{hexTime(tt.forget) + "s1"}) {
				t.Errorf("sf = %q, %v; want the stimulus at %s", sf, err, tt.forget)
			}
			if _, err := s.ExpireStimuli(ctx, tt.forget.Add(-time.Nanosecond), 10); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetStimulus(ctx, "s1"); err != nil {
				t.Errorf("before its forget time: %v", err)
			}
			if _, err := s.ExpireStimuli(ctx, tt.forget, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetStimulus(ctx, "s1"); !errors.Is(err, weft.ErrNotFound) {
				t.Errorf("at its forget time: %v, want not found", err)
			}
		})
	}
}

// expiredReservations lists the reservations whose deadline is not after
// now, earliest first, up to limit, and none settled since.
func TestExpiredReservations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := csOpen(t, c, "{t:expired}", roleCatalog, clock.Now, 0)
	deadlines := map[string]time.Duration{"s1": 30 * time.Second, "s2": 10 * time.Second, "s3": time.Minute, "s4": 20 * time.Second}
	for sid, d := range deadlines {
		if _, err := s.EnqueueStimulus(ctx, weft.Stimulus{ID: sid, Name: "sig", Payload: json.RawMessage(`1`), ExpiresAt: csExpiry}); err != nil {
			t.Fatal(err)
		}
		if err := s.reserveStimulus(ctx, sid, "i-"+sid, storetest.Epoch, storetest.Epoch.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	// s4 is settled: no longer a reservation.
	if err := s.releaseStimulus(ctx, "s4", "i-s4"); err != nil {
		t.Fatal(err)
	}
	res := func(sid string) reservation {
		return reservation{Stimulus: sid, Instance: "i-" + sid, Deadline: storetest.Epoch.Add(deadlines[sid])}
	}
	tests := []struct {
		at    time.Duration
		limit int
		want  []reservation
	}{
		{5 * time.Second, 10, nil},
		{10*time.Second - time.Nanosecond, 10, nil},
		{10 * time.Second, 10, []reservation{res("s2")}},
		{30 * time.Second, 10, []reservation{res("s2"), res("s1")}},
		{30 * time.Second, 1, []reservation{res("s2")}},
		{time.Hour, 10, []reservation{res("s2"), res("s1"), res("s3")}},
		{time.Hour, 0, nil},
	}
	for _, tt := range tests {
		got, err := s.expiredReservations(ctx, storetest.Epoch.Add(tt.at), tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !csSameReservations(got, tt.want) {
			t.Errorf("at +%s, limit %d: %+v, want %+v", tt.at, tt.limit, got, tt.want)
		}
	}
}

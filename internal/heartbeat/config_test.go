package heartbeat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/heartbeat"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	got := heartbeat.Config{}.WithDefaults()
	want := heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 1000, Cycle: 2 * time.Second}
	if got != want {
		t.Errorf("WithDefaults() = %+v, want %+v", got, want)
	}
	if again := got.WithDefaults(); again != got {
		t.Errorf("WithDefaults not idempotent: %+v then %+v", got, again)
	}
	if c := (heartbeat.Config{}).Capacity(); c != 20000 {
		t.Errorf("default Capacity() = %d, want 20000", c)
	}
	s, err := heartbeat.New(heartbeat.Config{Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config(); got.Batch != 5 || got.Tick != want.Tick || got.Cycle != want.Cycle {
		t.Errorf("Scheduler.Config() = %+v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  heartbeat.Config
		want string // substring of the error; empty means valid
	}{
		{"defaults", heartbeat.Config{}, ""},
		{"no retries", heartbeat.Config{MaxRetries: 0}, ""},
		{"the host's retries", heartbeat.Config{MaxRetries: heartbeat.DefaultMaxRetries}, ""},
		{"negative retries", heartbeat.Config{MaxRetries: -1}, "Config.MaxRetries"},
		{"cycle equals tick", heartbeat.Config{Tick: time.Second, Cycle: time.Second}, ""},
		{"negative tick", heartbeat.Config{Tick: -time.Second}, "Config.Tick"},
		{"negative batch", heartbeat.Config{Batch: -1}, "Config.Batch"},
		{"negative cycle", heartbeat.Config{Cycle: -1}, "Config.Cycle"},
		{"cycle below tick", heartbeat.Config{Tick: time.Second, Cycle: 500 * time.Millisecond}, "Config.Cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := heartbeat.New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New(%+v) = %v, want no error", tt.cfg, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New(%+v) = %v, want an error naming %s", tt.cfg, err, tt.want)
			}
		})
	}
}

// TestConfigValidateNamesEveryField: Validate reports every impossible
// field at once, each as a *ConfigError naming it, so that the host can
// name its own keys; on a Config as given it judges zeros too.
func TestConfigValidateNamesEveryField(t *testing.T) {
	t.Parallel()
	err := heartbeat.Config{Tick: 3 * time.Second, Cycle: 2 * time.Second, MaxRetries: -1}.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *heartbeat.ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not a *ConfigError", e)
		}
		fields = append(fields, ce.Field)
	}
	if got, want := strings.Join(fields, " "), "Batch Cycle MaxRetries"; got != want {
		t.Errorf("Validate named %s, want %s: %v", got, want, err)
	}
	if !strings.Contains(err.Error(), "heartbeat: Config.Cycle must be at least Config.Tick (3s), got 2s") {
		t.Errorf("Validate: %v", err)
	}
}

// TestZeroMaxRetriesRetriesNone: MaxRetries 0 means no retries, as the
// host's heartbeat.max_retries 0 does (it once meant the default, 3, here
// and none there): a renewal that fails goes to the backup queue at once.
func TestZeroMaxRetriesRetriesNone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ retries, sends int }{{0, 1}, {2, 3}, {heartbeat.DefaultMaxRetries, 4}} {
		s, err := heartbeat.New(heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 1, Cycle: 10 * time.Second, MaxRetries: tt.retries})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Config().MaxRetries; got != tt.retries {
			t.Errorf("MaxRetries %d is %d in use", tt.retries, got)
		}
		if _, err := s.Track(heartbeat.Item{ID: "a", Kind: heartbeat.InstanceLease}); err != nil {
			t.Fatal(err)
		}
		sends := 0
		// Within the first cycle: every send fails.
		for at := 100 * time.Millisecond; at < 5*time.Second; at += 100 * time.Millisecond {
			if r := s.Tick(epoch.Add(at)); len(r.Renew) > 0 {
				sends++
				s.Report(r.Seq, []heartbeat.Outcome{heartbeat.Error})
			}
		}
		if sends != tt.sends {
			t.Errorf("MaxRetries %d: %d sends in a cycle, want %d", tt.retries, sends, tt.sends)
		}
	}
}

func TestTrackRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		it   heartbeat.Item
		want string
	}{
		{"no id", heartbeat.Item{Kind: heartbeat.Activity}, "Item.ID"},
		{"no kind", heartbeat.Item{ID: "a"}, "Item.Kind"},
		{"bad kind", heartbeat.Item{ID: "a", Kind: 9}, "Item.Kind"},
		{"negative ttl", heartbeat.Item{ID: "a", Kind: heartbeat.LockLease, TTL: -1}, "Item.TTL"},
		{"negative timeout", heartbeat.Item{ID: "a", Kind: heartbeat.Activity, HeartbeatTimeout: -1}, "Item.HeartbeatTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := heartbeat.New(heartbeat.Config{})
			if _, err := s.Track(tt.it); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Track(%+v) = %v, want an error naming %s", tt.it, err, tt.want)
			}
			if n := s.Stats().Tracked; n != 0 {
				t.Errorf("Tracked = %d after a rejected item", n)
			}
		})
	}
}

func TestCheckTTL(t *testing.T) {
	t.Parallel()
	s, _ := heartbeat.New(heartbeat.Config{}) // cycle 2s
	tests := []struct {
		d    time.Duration
		warn bool
	}{{time.Second, true}, {4 * time.Second, true}, {4*time.Second + 1, false}, {8 * time.Second, false}}
	for _, tt := range tests {
		ws := s.CheckTTL("lease.ttl", tt.d)
		if got := len(ws) == 1; got != tt.warn {
			t.Errorf("CheckTTL(%s) = %v, want a warning: %v", tt.d, ws, tt.warn)
		}
		if tt.warn && (ws[0].Code != heartbeat.ShortTimeout || !strings.Contains(ws[0].Message, "lease.ttl")) {
			t.Errorf("CheckTTL(%s) = %+v, want a short_timeout warning naming lease.ttl", tt.d, ws[0])
		}
	}
}

// TestOverCapacityBacklog: with more items than capacity the main deque is
// not drained within a cycle; Backlog and the achieved cycle say so.
func TestOverCapacityBacklog(t *testing.T) {
	t.Parallel()
	cfg := heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 1, Cycle: 300 * time.Millisecond}
	s, _ := heartbeat.New(cfg)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		s.Track(heartbeat.Item{ID: id, Kind: heartbeat.InstanceLease})
	}
	var order []string
	for at := time.Duration(0); at <= 900*time.Millisecond; at += cfg.Tick {
		r := s.Tick(epoch.Add(at))
		for _, rn := range r.Renew {
			order = append(order, rn.ID)
		}
		s.Report(r.Seq, []heartbeat.Outcome{heartbeat.OK})
	}
	// Each cycle appends the renewed items behind the ones still waiting:
	// every item is visited, in turn, just less often than once per cycle.
	if got, want := strings.Join(order, ""), "abcdeabcde"; got != want {
		t.Errorf("renewal order %s, want %s", got, want)
	}
	st := s.Stats()
	if st.Backlog == 0 || st.Cycles != 3 || st.CycleTime != 300*time.Millisecond {
		t.Errorf("Stats = %+v, want a backlog after 3 cycles of 300ms", st)
	}
	if len(st.Warnings) != 1 || st.Warnings[0].Code != heartbeat.OverCapacity {
		t.Errorf("Warnings = %v, want over_capacity", st.Warnings)
	}
}

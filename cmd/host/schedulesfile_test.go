package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestServeSchedulesFile: schedules_file is applied at start and its
// schedules fire; a restart with the same file changes nothing; an
// invalid document stops the start, naming its place in the file and the
// field; a schedule of a workflow that is not saved stops it too.
func TestServeSchedulesFile(t *testing.T) {
	t.Parallel()
	data, dir := t.TempDir(), t.TempDir()
	seed := t.TempDir()
	writeFile(t, seed, "tick.yaml", "name: tick\nsteps: [{id: s, set: {at: '${ input.at }'}}]\noutput: '${ vars.at }'\n")
	file := writeFile(t, dir, "schedules.yaml", `
# every second, the run's input says when
- id: ticker
  workflow: tick
  input: { at: "${ schedule.time }" }
  spec: { every: 1s }
`)
	start := func(t *testing.T, file string) (*server, *logtest.Buffer, error) {
		t.Helper()
		cfg, err := config.Load(parseHostFlags(t, "--listen", "127.0.0.1:0", "--data-dir", data, "--set", "seed_dirs="+seed,
			"--set", "plugins.cache_dir="+testplugins.CacheDir(t), "--set", "schedules_file="+file).sources(t.TempDir(), nil))
		if err != nil {
			return nil, nil, err
		}
		logs := &logtest.Buffer{}
		s, err := openServer(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			return nil, logs, err
		}
		s.start()
		return s, logs, nil
	}
	stop := func(t *testing.T, s *server) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.shutdown(ctx); err != nil {
			t.Error(err)
		}
	}
	ran := func(t *testing.T, s *server) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			items, _, err := s.node.Instances(context.Background(), weft.InstanceFilter{Workflow: "tick", Status: weft.StatusCompleted, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(items) > 0 {
				for _, in := range items {
					if !strings.HasPrefix(in.ID, "ticker@") {
						t.Errorf("run %s is not named after its schedule", in.ID)
					}
				}
				return len(items)
			}
			if time.Now().After(deadline) {
				t.Fatal("no run of the schedule completed")
			}
			time.Sleep(50 * time.Millisecond) // polling, with a deadline
		}
	}

	s, logs, err := start(t, file)
	if err != nil {
		t.Fatal(err)
	}
	ran(t, s)
	if !strings.Contains(logs.String(), "created=ticker") {
		t.Errorf("log:\n%s", logs)
	}
	stop(t, s)

	s, logs, err = start(t, file)
	if err != nil {
		t.Fatal(err)
	}
	ran(t, s)
	if !strings.Contains(logs.String(), "unchanged=ticker") {
		t.Errorf("log:\n%s", logs)
	}
	evs, err := s.node.ScheduleEvents(context.Background(), "ticker", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == weft.ScheduleUpdated || e.Type == weft.ScheduleCreated && e.Seq != 1 || e.Seq == 1 && e.Actor != "schedules_file" {
			t.Errorf("event %d %s by %s after a restart with the same file", e.Seq, e.Type, e.Actor)
		}
	}
	stop(t, s)

	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"bad cron", "- id: a\n  workflow: tick\n  spec: {cron: '61 * * * *'}\n", []string{"line 1: schedules[0]: spec.cron[0]", "above maximum"}},
		{"two problems", "- id: a\n  workflow: tick\n  spec: {every: 1m}\n- id: B\n  workflow: tick\n  spec: {every: 1m, time_zone: Mars}\n",
			[]string{"line 4: schedules[1]: id", "schedules[1]: spec.time_zone"}},
		{"twice", "- id: a\n  workflow: tick\n  spec: {every: 1m}\n- id: a\n  workflow: tick\n  spec: {every: 2m}\n", []string{"schedules[1]: schedule a is in the file twice"}},
		{"not a list", "a: {}\n", []string{"want a list of schedule documents"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := start(t, writeFile(t, t.TempDir(), "schedules.yaml", tc.file))
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("start: %v, want an invalid configuration", err)
			}
			for _, w := range append(tc.want, "schedules_file (from flag --set schedules_file)") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	// Valid, but of a workflow this store does not have: the start stops.
	_, _, err = start(t, writeFile(t, dir, "nowhere.yaml", "- id: a\n  workflow: nowhere\n  spec: {every: 1m}\n"))
	if err == nil || !strings.Contains(err.Error(), `schedules_file`) || !strings.Contains(err.Error(), `no workflow named "nowhere"`) {
		t.Errorf("start with a schedule of no workflow: %v", err)
	}
}

package embedded_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/storetest"
)

// openBoltFile opens the bbolt store file at path (EngineBolt: a file of an
// older build, a backup) with clock now, closed when t ends.
func openBoltFile(t *testing.T, path string, now func() time.Time) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(path, embedded.Config{Now: now, Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, e embedded.Engine) {
		storetest.Exercise(t, func(t *testing.T, now func() time.Time) (store.Store, func() store.Store) {
			path := storePath(t.TempDir(), e)
			s := openE(t, e, path, now)
			reopen := func() store.Store {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openE(t, e, path, now)
				return s
			}
			return s, reopen
		})
	})
}

func TestOpenRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	boltFile := func(name string, fill func(tx *bolt.Tx) error) string {
		p := filepath.Join(dir, name)
		db, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fill); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	valid := filepath.Join(dir, "valid.db")
	s, err := embedded.Open(valid, embedded.Config{Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"text", write("text.db", bytes.Repeat([]byte("not a database\n"), 1000)), "invalid"},
		{"truncated", write("truncated.db", whole[:100]), ""},
		{"meta pages zeroed", write("zeroed.db", append(make([]byte, 8192), whole[8192:]...)), ""},
		{"another program's", boltFile("other.db", func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("users"))
			return err
		}), "not a weft store"},
		{"newer schema", boltFile("newer.db", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			return b.Put([]byte("schema"), []byte("4"))
		}), `schema version "4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := embedded.Open(tt.path, embedded.Config{Engine: embedded.EngineBolt})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%s) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want it to name %s and say %q", err, tt.path, tt.want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}

func TestOpenLockedFile(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, e embedded.Engine) {
		path := storePath(t.TempDir(), e)
		openE(t, e, path, nil)
		_, err := embedded.Open(path, embedded.Config{OpenTimeout: 50 * time.Millisecond, Engine: e})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked by another process") {
			t.Errorf("second Open: %v, want a lock error naming the file", err)
		}
	})
}

func TestOpenCreatesDirectory(t *testing.T) {
	t.Parallel()
	forEngines(t, func(t *testing.T, e embedded.Engine) {
		path := storePath(filepath.Join(t.TempDir(), "data", "nested"), e)
		s := openE(t, e, path, nil)
		if s.Path() != path {
			t.Errorf("Path() = %q", s.Path())
		}
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()
	d := embedded.Config{}.WithDefaults()
	if d.Logger == nil || d.Now == nil ||
		d.MaxBatchSize != embedded.DefaultMaxBatchSize || d.OpenTimeout != embedded.DefaultOpenTimeout ||
		d.DeliveredRetention != embedded.DefaultDeliveredRetention || d.DeadLetterRetention != embedded.DefaultDeadLetterRetention ||
		d.Engine != embedded.EnginePebble {
		t.Errorf("defaults = %+v", d)
	}
	tests := []struct {
		name string
		cfg  embedded.Config
		want string
	}{
		{"MaxBatchSize", embedded.Config{MaxBatchSize: -1}, "MaxBatchSize"},
		{"OpenTimeout", embedded.Config{OpenTimeout: -1}, "OpenTimeout"},
		{"DeliveredRetention", embedded.Config{DeliveredRetention: -1}, "DeliveredRetention"},
		{"DeadLetterRetention", embedded.Config{DeadLetterRetention: -1}, "DeadLetterRetention"},
		{"Engine", embedded.Config{Engine: "sqlite"}, `Engine must be "bolt" or "pebble", got "sqlite"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := embedded.Open(filepath.Join(t.TempDir(), "x.db"), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestRetention: a delivered stimulus is remembered until its ExpiresAt or
// DeliveredRetention after delivery, whichever is later; a dead one for
// DeadLetterRetention.
func TestRetention(t *testing.T) {
	t.Parallel()
	forEngines(t, testRetention)
}

func testRetention(t *testing.T, e embedded.Engine) {
	clock := storetest.NewClock(storetest.Epoch)
	s, err := embedded.Open(storePath(t.TempDir(), e), embedded.Config{
		Now: clock.Now, DeliveredRetention: time.Hour, DeadLetterRetention: 2 * time.Hour, Engine: e,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	t0 := storetest.Epoch
	for _, st := range []weft.Stimulus{
		{ID: "short", Name: "e", ExpiresAt: t0.Add(time.Minute)},
		{ID: "long", Name: "e", ExpiresAt: t0.Add(3 * time.Hour)},
		{ID: "dies", Name: "e", ExpiresAt: t0.Add(time.Second)},
	} {
		if _, err := s.EnqueueStimulus(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"short", "long"} {
		in := &weft.Instance{ID: fmt.Sprint("i", i), Workflow: "w", Status: weft.StatusRunning}
		if _, err := s.Commit(ctx, store.Commit{Instance: in, DeliveredStimulus: id}); err != nil {
			t.Fatal(err)
		}
	}
	// Deliver records stimuli with the same retention as Commit.
	for _, st := range []weft.Stimulus{
		{ID: "dshort", Name: "e", ExpiresAt: t0.Add(time.Minute)},
		{ID: "dlong", Name: "e", ExpiresAt: t0.Add(3 * time.Hour)},
	} {
		if _, err := s.Deliver(ctx, &st, []weft.Message{{InstanceID: "i0", ID: st.ID, Kind: "stimulus"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ExpireStimuli(ctx, t0.Add(time.Second), 10); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at    time.Duration
		known []string
	}{
		{59 * time.Minute, []string{"short", "long", "dies", "dshort", "dlong"}},
		{time.Hour, []string{"long", "dies", "dlong"}},
		{2*time.Hour + time.Second, []string{"long", "dlong"}},
		{3 * time.Hour, nil},
	}
	for _, tt := range tests {
		if _, err := s.ExpireStimuli(ctx, t0.Add(tt.at), 10); err != nil {
			t.Fatal(err)
		}
		var known []string
		for _, id := range []string{"short", "long", "dies", "dshort", "dlong"} {
			_, err := s.GetStimulus(ctx, id)
			switch {
			case err == nil:
				known = append(known, id)
			case !errors.Is(err, weft.ErrNotFound):
				t.Fatal(err)
			}
		}
		if fmt.Sprint(known) != fmt.Sprint(tt.known) {
			t.Errorf("at +%s: known %v, want %v", tt.at, known, tt.known)
		}
	}
}

// TestCommitDuringClose: writes racing Close either succeed or return
// ErrClosed; none hangs or panics.
func TestCommitDuringClose(t *testing.T) {
	t.Parallel()
	forEngines(t, testCommitDuringClose)
}

func testCommitDuringClose(t *testing.T, e embedded.Engine) {
	s, err := embedded.Open(storePath(t.TempDir(), e), embedded.Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			in := &weft.Instance{ID: fmt.Sprint(i), Workflow: "w", Status: weft.StatusPending, Vars: json.RawMessage(`{}`)}
			if _, err := s.Commit(context.Background(), store.Commit{Instance: in}); err != nil && !errors.Is(err, weft.ErrClosed) {
				t.Errorf("Commit: %v", err)
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	wg.Wait()
}

// TestCorruptDataPages: garbage in the data pages (the meta pages intact)
// yields errors naming the file, from Open or from the calls, and never
// crashes the process.
func TestCorruptDataPages(t *testing.T) {
	t.Parallel()
	page := os.Getpagesize()
	tests := []struct {
		name    string
		corrupt func(data []byte)
	}{
		{"everything after the meta pages", func(data []byte) {
			for i := 4 * page; i < len(data); i++ {
				data[i] = byte(i*7 + 3)
			}
		}},
		{"leaf contents", func(data []byte) {
			// A page header is id (8 bytes), flags (2), count (2),
			// overflow (4); 0x02 marks a leaf. Keep the headers.
			for p := 2 * page; p+page <= len(data); p += page {
				if binary.LittleEndian.Uint16(data[p+8:]) == 0x02 {
					for i := p + 16; i < p+page; i++ {
						data[i] = byte(i*7 + 3)
					}
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "weft.db")
			s, err := embedded.Open(path, embedded.Config{Engine: embedded.EngineBolt})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				in := &weft.Instance{ID: fmt.Sprintf("instance-%04d", i), Workflow: "w", Status: weft.StatusRunning,
					Vars: json.RawMessage(fmt.Sprintf(`{"pad": %q}`, strings.Repeat("x", 500)))}
				if _, err := s.Commit(t.Context(), store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.corrupt(data)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err = embedded.Open(path, embedded.Config{Engine: embedded.EngineBolt})
			if err != nil {
				t.Logf("Open: %v", err)
				if !strings.Contains(err.Error(), path) {
					t.Errorf("Open: %v does not name the file", err)
				}
				return
			}
			defer s.Close()
			_, _, err = s.ListInstances(t.Context(), weft.InstanceFilter{Limit: 1000})
			_, err2 := s.GetInstance(t.Context(), "instance-0150")
			for _, err := range []error{err, err2} {
				t.Logf("read: %v", err)
				if err != nil && !strings.Contains(err.Error(), path) {
					t.Errorf("error %v does not name the file", err)
				}
			}
			if err == nil && err2 == nil {
				t.Error("the corruption went unnoticed by these reads")
			}
		})
	}
}

// TestCatalogReadsSeeEveryWrite: GetDefinition and GetPlugin answer from a
// cache of what they decoded; every write of the catalog must show in the
// next read, also while reads run concurrently with the writes.
func TestCatalogReadsSeeEveryWrite(t *testing.T) {
	t.Parallel()
	forEngines(t, testCatalogReadsSeeEveryWrite)
}

func testCatalogReadsSeeEveryWrite(t *testing.T, e embedded.Engine) {
	s := openE(t, e, storePath(t.TempDir(), e), nil)
	ctx := t.Context()
	for i := 1; i <= 3; i++ {
		if _, _, err := s.PutDefinition(ctx, "w", fmt.Sprint("h", i), []byte("name: w")); err != nil {
			t.Fatal(err)
		}
		if d, err := s.GetDefinition(ctx, "w", 0); err != nil || d.Version != i {
			t.Fatalf("after saving version %d, the latest is %+v, %v", i, d, err)
		}
	}
	if err := s.DeleteDefinition(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetDefinition(ctx, "w", 0); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("a deleted definition still reads: %v", err)
	}

	// Readers hammer GetPlugin while versions are uploaded one by one.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.GetPlugin(ctx, "p"); err != nil && !errors.Is(err, weft.ErrNotFound) {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 50 {
		v := fmt.Sprintf("%064x", i+1)
		if _, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "p", Version: v, Size: 1}); err != nil {
			t.Fatal(err)
		}
		if p, err := s.GetPlugin(ctx, "p"); err != nil || p.Current.Version != v {
			t.Fatalf("after uploading %s, GetPlugin says %+v, %v", v, p, err)
		}
	}
	close(stop)
	readers.Wait()
	if err := s.DeletePlugin(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPlugin(ctx, "p"); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("a deleted plugin still reads: %v", err)
	}
}

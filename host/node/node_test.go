package node_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/embedded/embeddedtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

func config(dataDir string) node.Config {
	return node.Config{
		NodeID:  "n1",
		DataDir: dataDir,
		Engine:  engine.Config{TimerInterval: 10 * time.Millisecond},
	}
}

// open opens a node on dataDir and runs it until the test ends (or stop is
// called); it returns the node and its log. Unless cfg sets one, the node
// uses the compilation cache every test shares.
func open(t *testing.T, cfg node.Config) (n *node.Node, logs *logtest.Buffer, stop func()) {
	t.Helper()
	if cfg.Plugins.CacheDir == "" {
		cfg.Plugins.CacheDir = testplugins.CacheDir(t)
	}
	logs = &logtest.Buffer{}
	n, err := node.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = n.Run(ctx); close(ran) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-ran
			if err := n.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return n, logs, stop
}

const greet = `
name: greet
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input }" }, output: up }
output: "${ vars.up.text }"
`

// TestOpenRefusesADataDirInUse: a second node on the same data dir is
// refused with the store's message, not a panic in Open's clean-up.
func TestOpenRefusesADataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, config(dir))
	cfg := config(dir)
	cfg.Plugins.CacheDir = testplugins.CacheDir(t)
	n, err := node.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		n.Close()
		t.Fatal("a second node opened a data dir in use")
	}
	if storeDir := filepath.Join(dir, "store"); !strings.Contains(err.Error(), "directory is locked by another process") ||
		!strings.Contains(err.Error(), storeDir) {
		t.Errorf("error %v, want the store's directory %s is locked", err, storeDir)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  node.Config
		want string
		is   error
	}{
		{"no data dir", node.Config{}, "DataDir is required", nil},
		{"redis without addresses", node.Config{DataDir: t.TempDir(), Store: "redis"}, `Store "redis" needs at least one address in RedisAddrs`, nil},
		{"unknown store", node.Config{DataDir: t.TempDir(), Store: "mongo"}, `Store must be "embedded" or "redis", got "mongo"`, nil},
		{"queue", node.Config{DataDir: t.TempDir(), QueueCapacity: -1}, "QueueCapacity must be at least 1, got -1", nil},
		{"engine", node.Config{DataDir: t.TempDir(), Engine: engine.Config{Workers: -2}}, "Workers must be at least 1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := node.Open(context.Background(), tc.cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPluginCatalogue: put (created, then unchanged), refused names and
// modules, show, list, delete while pinned and after.
func TestPluginCatalogue(t *testing.T) {
	t.Parallel()
	n, _, _ := open(t, config(t.TempDir()))
	ctx := context.Background()
	kit := testplugins.Bytes(t, "kit")

	rec, created, err := n.PutPlugin(ctx, "kit", kit)
	if err != nil || !created || rec.Version != plugins.Hash(kit) || rec.Size != int64(len(kit)) || rec.CreatedAt.IsZero() {
		t.Fatalf("PutPlugin = %+v, %v, %v", rec, created, err)
	}
	if _, created, err := n.PutPlugin(ctx, "kit", kit); err != nil || created {
		t.Fatalf("second PutPlugin: created %v, %v", created, err)
	}
	if _, _, err := n.PutPlugin(ctx, "Kit!", kit); !errors.Is(err, node.ErrInvalidName) || !strings.Contains(err.Error(), `"Kit!"`) {
		t.Fatalf("bad name: %v", err)
	}
	var ve *plugins.ValidationError
	if _, _, err := n.PutPlugin(ctx, "junk", []byte("junk")); !errors.As(err, &ve) {
		t.Fatalf("junk module: %v", err)
	}
	if _, err := n.GetPlugin(ctx, "junk"); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("a refused module was recorded: %v", err)
	}
	items, next, err := n.ListPlugins(ctx, "", 10)
	if err != nil || len(items) != 1 || items[0].Name != "kit" || next != "" {
		t.Fatalf("ListPlugins = %+v, %q, %v", items, next, err)
	}

	// Pinned by a suspended instance: refused.
	if _, _, err := n.Engine().SaveDefinition(ctx, []byte(`
name: hold
steps:
  - { id: a, activity: kit.echo, input: 1 }
  - { id: w, wait: { event: go, key: k } }
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := n.Engine().Start(ctx, "hold", nil, "hold-1")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if got, err := n.Engine().Wait(wctx, inst.ID); err != nil || got.Status != weft.StatusSuspended {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	var iu *weft.InUseError
	if err := n.DeletePlugin(ctx, "kit", false); !errors.As(err, &iu) || !slices.Equal(iu.Workflows, []string{"hold"}) || !strings.Contains(err.Error(), `in use by workflow(s) hold`) {
		t.Fatalf("DeletePlugin of a plugin a saved workflow calls: %v", err)
	}
	// Forced past the workflows, not past the instances that pin it.
	if err := n.DeletePlugin(ctx, "kit", true); !errors.As(err, &iu) || len(iu.Instances) == 0 || iu.Instances[0] != "hold-1" {
		t.Fatalf("DeletePlugin while pinned: %v", err)
	}
	if _, err := n.Engine().Cancel(ctx, inst.ID, weft.Operation{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, err := n.Engine().WaitFinished(wctx, inst.ID); err != nil || got.Status != weft.StatusCancelled {
		t.Fatalf("WaitFinished = %+v, %v", got, err)
	}
	if err := n.DeletePlugin(ctx, "kit", false); !errors.As(err, &iu) || len(iu.Workflows) != 1 {
		t.Fatalf("DeletePlugin unforced, the instance ended, the workflow saved: %v", err)
	}
	if err := n.DeletePlugin(ctx, "kit", true); err != nil {
		t.Fatal(err)
	}
	if err := n.DeletePlugin(ctx, "kit", false); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("second DeletePlugin: %v", err)
	}
}

// TestRestart: a node reopened on the same data directory loads the stored
// plugins and runs their workflows at once.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	first, _, stop := open(t, config(dir))
	if _, _, err := first.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Engine().SaveDefinition(ctx, []byte(greet)); err != nil {
		t.Fatal(err)
	}
	stop()

	cfg := config(dir)
	cfg.Registerer = prometheus.NewRegistry()
	second, logs, _ := open(t, cfg)
	<-second.Warmed()
	if !strings.Contains(logs.String(), "loaded stored plugins") || !strings.Contains(logs.String(), "count=1") {
		t.Fatalf("log:\n%s", logs)
	}
	inst, _, err := second.Engine().Start(ctx, "greet", json.RawMessage(`"ada"`), "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := second.Engine().WaitFinished(wctx, inst.ID)
	if err != nil || got.Status != weft.StatusCompleted || string(got.Output) != `"ADA"` {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
}

// TestRestartWithoutBlob: a stored plugin whose blob is gone does not stop
// the node from opening; the loss is logged as an error naming it.
func TestRestartWithoutBlob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, _, stop := open(t, config(dir))
	if _, _, err := first.PutPlugin(context.Background(), "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	stop()
	blobs := filepath.Join(dir, "blobs")
	if err := os.RemoveAll(blobs); err != nil {
		t.Fatal(err)
	}
	second, logs, _ := open(t, config(dir))
	<-second.Warmed()
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "plugin=kit") {
		t.Fatalf("log:\n%s", logs)
	}
	if err := second.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestReadyAndRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, _, stop := open(t, config(t.TempDir()))
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if _, err := n.Refresh(ctx, nil); !errors.Is(err, node.ErrRefreshDisabled) {
		t.Fatalf("Refresh without workflows_dir: %v", err)
	}
	stop()
	if err := n.Ready(ctx); err == nil {
		t.Fatal("Ready after Close answered nil")
	}

	wf := t.TempDir()
	cfg := config(t.TempDir())
	cfg.WorkflowsDir = wf
	m, _, _ := open(t, cfg)
	if _, _, err := m.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wf, "greet.yaml"), []byte(greet), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := m.Refresh(ctx, nil)
	if err != nil || res.Status != weft.Refreshed || len(res.Files) != 1 || !res.Files[0].Created {
		t.Fatalf("Refresh = %+v, %v", res, err)
	}
}

// TestReadyReportsACorruptStore: once a write found the embedded store
// corrupt (a block of its table whose checksum fails), the node is not
// ready, and says why.
func TestReadyReportsACorruptStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const marker = "ABCDEFGHIJKLMNOPQRSUVWXY"
	legacyDataDir(t, dir, kitRecord(t), 100, marker)
	// The migration writes the store in a table.
	_, _, stop := open(t, config(dir))
	stop()
	storeDir := filepath.Join(dir, "store")
	embeddedtest.CorruptTable(t, storeDir, []byte(marker))

	cfg := config(dir)
	cfg.Plugins.CacheDir = testplugins.CacheDir(t)
	n, err := node.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	<-n.Warmed()
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("Ready before any write: %v", err)
	}
	if err := n.Store().DeleteInstance(ctx, "old-050", 0); err == nil {
		t.Fatal("a delete through a corrupt block succeeded")
	}
	err = n.Ready(ctx)
	if !errors.Is(err, embedded.ErrBroken) || !strings.Contains(err.Error(), storeDir) {
		t.Fatalf("Ready after the write failed: %v, want embedded.ErrBroken naming %s", err, storeDir)
	}
}

// corruptFirstLeaf overwrites the page id in the header of the first leaf
// of bucket, a branch, which bbolt checks (panicking) when it reads it.
// A page header is id (8 bytes), flags (2), count (2) and overflow (4); a
// branch element is pos (4), ksize (4) and the child's page id (8).
func corruptFirstLeaf(t *testing.T, path, bucket string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	size := int64(db.Info().PageSize)
	var root uint64
	err = db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte(bucket)).Root())
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var head [32]byte
	if _, err := f.ReadAt(head[:], int64(root)*size); err != nil {
		t.Fatal(err)
	}
	if flags := binary.LittleEndian.Uint16(head[8:]); flags != 0x01 {
		t.Fatalf("bucket %s: its root, page %d, is not a branch (flags %#x)", bucket, root, flags)
	}
	leaf := binary.LittleEndian.Uint64(head[24:])
	var id [8]byte
	binary.LittleEndian.PutUint64(id[:], leaf+1000)
	if _, err := f.WriteAt(id[:], int64(leaf)*size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

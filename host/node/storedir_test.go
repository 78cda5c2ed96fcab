package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// kitRecord is the record a node makes of the kit plugin (its version,
// size and activities), from a node of its own.
func kitRecord(t *testing.T) weft.PluginRecord {
	t.Helper()
	n, _, stop := open(t, config(t.TempDir()))
	defer stop()
	rec, _, err := n.PutPlugin(context.Background(), "kit", testplugins.Bytes(t, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	return *rec
}

// legacyDataDir makes in dir the data directory of an earlier version: a
// bbolt store file, weft.db, written by the embedded store on EngineBolt,
// holding the greet definition, the kit plugin (its blob in blobs/) and
// instances (finished, with history, one of them holding marker in its
// input when marker is not empty). It returns what the store read back:
// dumpStore's text.
func legacyDataDir(t *testing.T, dir string, kit weft.PluginRecord, instances int, marker string) string {
	t.Helper()
	ctx := context.Background()
	blobs, err := blobfile.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := blobs.Put(ctx, kit.Version, testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(filepath.Join(dir, node.LegacyStoreFile), embedded.Config{Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutPlugin(ctx, kit); err != nil {
		t.Fatal(err)
	}
	def, err := definition.Parse([]byte(greet))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutDefinition(ctx, def.Name, def.Hash(), []byte(greet)); err != nil {
		t.Fatal(err)
	}
	for i := range instances {
		// Hex digits, so that a table's compression keeps marker as it
		// is (see embeddedtest.CorruptTable).
		pad := make([]byte, 150)
		for j := range pad {
			pad[j] = "0123456789abcdef"[(i*7919+j*104729+j*j)%16]
		}
		m := ""
		if i == instances/2 {
			m = marker
		}
		in := &weft.Instance{ID: fmt.Sprintf("old-%03d", i), Workflow: "greet", Version: 1, Status: weft.StatusCompleted,
			Input: json.RawMessage(fmt.Sprintf(`{"m": %q, "pad": %q}`, m, pad)), Output: json.RawMessage(`"DONE"`)}
		if _, err := s.Commit(ctx, store.Commit{Instance: in,
			History: []weft.HistoryEntry{{Type: "instance_started"}, {Type: "instance_completed"}}}); err != nil {
			t.Fatal(err)
		}
	}
	want := dumpStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// dumpStore is every instance (with its history), definition and plugin
// of s, as text to compare.
func dumpStore(t *testing.T, s store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	line := func(what string, v any, err error) {
		if err != nil {
			t.Fatalf("dump: %s: %v", what, err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n", what, j)
	}
	insts, _, err := s.ListInstances(ctx, weft.InstanceFilter{Limit: 1000})
	line("instances", len(insts), err)
	for _, in := range insts {
		got, err := s.GetInstance(ctx, in.ID)
		line("instance", got, err)
		h, err := s.History(ctx, in.ID, 0, 100)
		line("history", h, err)
	}
	defs, _, err := s.ListDefinitions(ctx, "", 100)
	line("definitions", defs, err)
	for _, d := range defs {
		got, err := s.GetDefinition(ctx, d.Name, d.Version)
		line("definition", got, err)
	}
	plugs, _, err := s.ListPlugins(ctx, "", 100)
	line("plugins", plugs, err)
	for _, p := range plugs {
		got, err := s.GetPlugin(ctx, p.Name)
		line("plugin", got, err)
	}
	return b.String()
}

// TestOpenMigratesTheStoreOfAnEarlierVersion: a node on the data directory
// of an earlier version (a bbolt weft.db) migrates it into store/, logs
// it, keeps the file as weft.db.migrated, and serves every record of it:
// the migrated definition and plugin run a new instance. A second start
// opens the store without migrating again.
func TestOpenMigratesTheStoreOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	want := legacyDataDir(t, dir, kitRecord(t), 20, "")
	file, storeDir := filepath.Join(dir, "weft.db"), filepath.Join(dir, "store")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	n, logs, stop := open(t, config(dir))
	if got := dumpStore(t, n.Store()); got != want {
		t.Errorf("the migrated store reads:\n%s\nwant:\n%s", got, want)
	}
	log := logs.String()
	if !strings.Contains(log, "level=INFO msg=\"node: store migrated") || !strings.Contains(log, "from="+file) ||
		!strings.Contains(log, "to="+storeDir) || !strings.Contains(log, "took=") {
		t.Errorf("no Info naming the migration's from, to and duration; log:\n%s", log)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the migration: %v", file, err)
	}
	if kept, err := os.ReadFile(file + ".migrated"); err != nil || !bytes.Equal(kept, before) {
		t.Errorf("%s.migrated: %d bytes, %v; want the file as it was (%d bytes)", file, len(kept), err, len(before))
	}
	<-n.Warmed()
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	inst, _, err := n.Engine().Start(ctx, "greet", json.RawMessage(`"ada"`), "new-1")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if got, err := n.Engine().WaitFinished(wctx, inst.ID); err != nil || got.Status != weft.StatusCompleted || string(got.Output) != `"ADA"` {
		t.Fatalf("an instance of the migrated definition and plugin: %+v, %v", got, err)
	}
	stop()

	second, logs, _ := open(t, config(dir))
	if strings.Contains(logs.String(), "migrat") {
		t.Errorf("the second start migrated again; log:\n%s", logs)
	}
	if got, err := second.Store().GetInstance(ctx, "new-1"); err != nil || got.Status != weft.StatusCompleted {
		t.Errorf("the instance run after the migration, on the second start: %+v, %v", got, err)
	}
	if got, err := second.Store().GetInstance(ctx, "old-000"); err != nil || string(got.Output) != `"DONE"` {
		t.Errorf("a migrated instance, on the second start: %+v, %v", got, err)
	}
	if kept, err := os.ReadFile(file + ".migrated"); err != nil || !bytes.Equal(kept, before) {
		t.Errorf("%s.migrated changed on the second start: %v", file, err)
	}
}

// TestOpenPrefersTheStoreToAnOldFile: with both store/ and weft.db in the
// data directory, the node opens store/, leaves weft.db as it is, and
// warns that it does not read it. An earlier migration's
// weft.db.migrated is never overwritten: a second migration keeps its
// file under the next free name.
func TestOpenPrefersTheStoreToAnOldFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	storeDir, file := filepath.Join(dir, "store"), filepath.Join(dir, "weft.db")
	storeWith(t, storeDir, embedded.EnginePebble, "in-store")
	storeWith(t, file, embedded.EngineBolt, "in-file")
	earlier := []byte("an earlier migration's file")
	if err := os.WriteFile(file+".migrated", earlier, 0o600); err != nil {
		t.Fatal(err)
	}

	n, logs, stop := open(t, config(dir))
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "file="+file) ||
		!strings.Contains(logs.String(), "not read") {
		t.Errorf("no Warn that %s is not read; log:\n%s", file, logs)
	}
	if _, err := n.Store().GetInstance(ctx, "in-store"); err != nil {
		t.Errorf("the store's instance: %v", err)
	}
	if _, err := n.Store().GetInstance(ctx, "in-file"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("the file's instance: %v, want ErrNotFound (the file is not read)", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("%s was moved: %v", file, err)
	}
	stop()

	// Moved aside, the store is made again from the file: a restore.
	if err := os.Rename(storeDir, storeDir+".aside"); err != nil {
		t.Fatal(err)
	}
	n, _, _ = open(t, config(dir))
	if _, err := n.Store().GetInstance(ctx, "in-file"); err != nil {
		t.Errorf("the file's instance, migrated: %v", err)
	}
	if got, err := os.ReadFile(file + ".migrated"); err != nil || !bytes.Equal(got, earlier) {
		t.Errorf("the earlier migration's %s.migrated was not kept: %q, %v", file, got, err)
	}
	if _, err := os.Stat(file + ".migrated.2"); err != nil {
		t.Errorf("the second migration's file: %v", err)
	}
}

// TestOpenRefusesACorruptOldFile: a weft.db that is not a sound store
// stops the start with an error naming it and the store it would have
// made, and leaves no store directory (nor a half-made one) and the file
// as it was.
func TestOpenRefusesACorruptOldFile(t *testing.T) {
	t.Parallel()
	kit := kitRecord(t)
	for _, tt := range []struct {
		name    string
		corrupt func(t *testing.T, file string)
	}{
		{"text", func(t *testing.T, file string) {
			if err := os.WriteFile(file, bytes.Repeat([]byte("not a store\n"), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, file string) {
			if err := os.Truncate(file, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"a corrupt page", func(t *testing.T, file string) { corruptFirstLeaf(t, file, "instances") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			legacyDataDir(t, dir, kit, 100, "")
			file, storeDir := filepath.Join(dir, "weft.db"), filepath.Join(dir, "store")
			tt.corrupt(t, file)
			before, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg := config(dir)
			cfg.Plugins.CacheDir = testplugins.CacheDir(t)
			n, err := node.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				n.Close()
				t.Fatal("a node started on a corrupt weft.db")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), storeDir) {
				t.Errorf("error %q: want it to name %s and %s", err, file, storeDir)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "store") {
					t.Errorf("the failed migration left %s", e.Name())
				}
			}
			if after, err := os.ReadFile(file); err != nil || !bytes.Equal(after, before) {
				t.Errorf("%s changed: %v", file, err)
			}
		})
	}
}

// storeWith writes at path, on engine, a store holding one finished
// instance, id.
func storeWith(t *testing.T, path string, engine embedded.Engine, id string) {
	t.Helper()
	s, err := embedded.Open(path, embedded.Config{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), store.Commit{Instance: &weft.Instance{ID: id, Workflow: "w", Status: weft.StatusCompleted}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

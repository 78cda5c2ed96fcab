package plugins

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"

	"github.com/weftworks/weft/internal/instrument"
)

// rewriteCacheDir is the rewrite cache's directory under Config.CacheDir,
// beside wazero's own (wazero-<version>-<arch>-<os>).
const rewriteCacheDir = "weft-rewrite"

// rewriteCacheFormat is part of every key and of every record's header.
// Bump it when the record's layout changes, and when precheck refuses
// something it accepted before: a load from this cache skips precheck, so
// a tightened rule would otherwise not reach versions rewritten earlier.
const rewriteCacheFormat = 2

// recordMagic starts every record: "weftrw" and the format, as two bytes.
var recordMagic = [8]byte{'w', 'e', 'f', 't', 'r', 'w', 0, rewriteCacheFormat}

// recordHeader is the size of a record's header: magic, key, length of
// the body, CRC-32C of the body.
const recordHeader = 8 + 32 + 8 + 4

// castagnoli is CRC-32C's table, computed by the processor where it can.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rewriteCache keeps the instrumentation's output on disk, so that a load
// of a version rewritten before (a restart, typically) skips precheck and
// the rewrite. wazero's compilation cache cannot spare them: it is keyed by
// the bytes compiled, which are the rewrite's output.
//
// A record is found by a key that covers the input's version and everything
// that changes the rewrite's output (instrument.Version and the Options),
// and wazero's version. It is written only after the version loaded, by
// the same Runtime, so a hit also means that wazero has cached the
// version's machine code, unless its cache was removed since, and a load
// that finds its record takes no compile token (see Runtime.compile).
//
// A record is never trusted: its header names its key, the length of its
// body and the body's CRC-32C, and one that does not match (torn,
// truncated, corrupt, another key's) is ignored, and replaced once the
// version is rewritten again. A checksum, not sha256, because it guards
// against accidents, not against someone who can write the directory: they
// could write wazero's machine code beside it, which wazero guards with a
// CRC too. On the 3.7 MB rewrite of a stock Go plugin CRC-32C takes
// 0.16 ms, sha256 2.5 ms.
// Records are written to a temporary file and renamed into place, so
// concurrent writers, even in other processes, never mix their bytes.
//
// A nil *rewriteCache, as with no CacheDir, finds nothing and stores
// nothing.
type rewriteCache struct {
	dir string
	log *slog.Logger
	// salt is the hash of everything in a key but the version: the same
	// for every load of a Runtime.
	salt [32]byte
	// warned is set by the first failed write: a directory that cannot be
	// written is reported once, then loads keep rewriting quietly.
	warned atomic.Bool
}

// newRewriteCache returns the cache in dir for modules rewritten with opt.
func newRewriteCache(dir string, opt instrument.Options, log *slog.Logger) *rewriteCache {
	h := sha256.New()
	// %#v prints every field of Options with its name, so that a field
	// added to Options is in the key without anyone remembering to add
	// it (TestRewriteKeyCoversOptions checks that each one counts).
	fmt.Fprintf(h, "weft rewrite cache %d\ninstrument %d\nwazero %s\n%#v\n", rewriteCacheFormat, instrument.Version, wazeroVersion(), opt)
	c := &rewriteCache{dir: dir, log: log}
	h.Sum(c.salt[:0])
	return c
}

// wazeroVersion is the version of wazero built in, as wazero itself reads
// it to name its cache directory.
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" && dep.Version != "" {
				return dep.Version
			}
		}
	}
	return "dev"
}

// key returns the key of version's record.
func (c *rewriteCache) key(version string) [32]byte {
	if c == nil {
		return [32]byte{}
	}
	h := sha256.New()
	h.Write(c.salt[:])
	h.Write([]byte(version))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *rewriteCache) path(key [32]byte) string {
	return filepath.Join(c.dir, hex.EncodeToString(key[:]))
}

// get returns the rewrite of version stored under key, or false when there
// is none that can be trusted.
func (c *rewriteCache) get(version string, key [32]byte) (*instrument.Result, bool) {
	if c == nil {
		return nil, false
	}
	path := c.path(key)
	data, err := os.ReadFile(path)
	if err != nil {
		// Missing, or a directory that cannot be read, which put reports
		// once when it cannot write either.
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Debug("plugins: cannot read the rewrite cache", "version", version, "err", err)
		}
		return nil, false
	}
	res, err := decodeRecord(data, key)
	if err != nil {
		c.log.Warn("plugins: ignoring a corrupt rewrite cache entry; the module is rewritten again", "version", version, "path", path, "err", err)
		return nil, false
	}
	return res, true
}

// put stores the rewrite of version under key. A failure costs only the
// next load a rewrite; the first one is logged.
func (c *rewriteCache) put(version string, key [32]byte, res *instrument.Result) {
	if c == nil {
		return
	}
	if err := c.write(key, encodeRecord(key, res)); err != nil && !c.warned.Swap(true) {
		c.log.Warn("plugins: cannot write the rewrite cache; loads will rewrite every module until it can be written (reported once)",
			"dir", c.dir, "version", version, "err", err)
	}
}

// write puts data into place under key's name atomically: a reader sees
// the old file or the whole new one.
func (c *rewriteCache) write(key [32]byte, data []byte) (err error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	path := c.path(key)
	f, err := os.CreateTemp(c.dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	// Without it a crash could leave a renamed but empty file; the hash
	// would catch that, but at the cost of a rewrite on every restart
	// until the version is loaded again.
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// encodeRecord lays out a record: the header (magic, key, length of the
// body in 8 bytes, CRC-32C of the body), then the body: the count of
// imports, each import as its kind and two length-prefixed names, and the
// rewritten module. Integers are little-endian, lengths and counts in the
// body 4 bytes.
func encodeRecord(key [32]byte, res *instrument.Result) []byte {
	size := 4 + len(res.Wasm)
	for _, imp := range res.Imports {
		size += 1 + 4 + len(imp.Module) + 4 + len(imp.Name)
	}
	data := make([]byte, recordHeader, recordHeader+size)
	data = binary.LittleEndian.AppendUint32(data, uint32(len(res.Imports)))
	for _, imp := range res.Imports {
		data = append(data, imp.Kind)
		data = binary.LittleEndian.AppendUint32(data, uint32(len(imp.Module)))
		data = append(data, imp.Module...)
		data = binary.LittleEndian.AppendUint32(data, uint32(len(imp.Name)))
		data = append(data, imp.Name...)
	}
	data = append(data, res.Wasm...)
	copy(data, recordMagic[:])
	copy(data[8:], key[:])
	binary.LittleEndian.PutUint64(data[40:], uint64(size))
	binary.LittleEndian.PutUint32(data[48:], crc32.Checksum(data[recordHeader:], castagnoli))
	return data
}

// decodeRecord returns the rewrite in data, a record of key, or says what
// is wrong with it. The result's module shares data's memory.
func decodeRecord(data []byte, key [32]byte) (*instrument.Result, error) {
	if len(data) < recordHeader || !bytes.Equal(data[:8], recordMagic[:]) {
		return nil, errors.New("not a rewrite cache record of this format")
	}
	if !bytes.Equal(data[8:40], key[:]) {
		return nil, errors.New("the record is another key's")
	}
	body := data[recordHeader:]
	if size := binary.LittleEndian.Uint64(data[40:]); size != uint64(len(body)) {
		return nil, fmt.Errorf("the record's body is %d bytes, its header says %d", len(body), size)
	}
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[48:]) {
		return nil, errors.New("the record's body does not match its checksum")
	}
	// The body is what encodeRecord wrote; reading it is still bounded,
	// so that corruption the checksum missed could not make it panic.
	d := recordDecoder{b: body}
	n := d.u32()
	if uint64(n) > uint64(len(body))/9 { // each import takes at least 9 bytes
		return nil, fmt.Errorf("the record lists %d imports in %d bytes", n, len(body))
	}
	imports := make([]instrument.Import, n)
	for i := range imports {
		imports[i].Kind = d.byte()
		imports[i].Module = string(d.bytes(d.u32()))
		imports[i].Name = string(d.bytes(d.u32()))
	}
	if d.bad {
		return nil, errors.New("the record's imports run past its end")
	}
	return &instrument.Result{Wasm: body[d.off:], Imports: imports}, nil
}

// recordDecoder reads a record's body; past its end it reads zeros and
// sets bad.
type recordDecoder struct {
	b   []byte
	off int
	bad bool
}

func (d *recordDecoder) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(d.b)-d.off) {
		d.bad = true
		d.off = len(d.b)
		return nil
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *recordDecoder) byte() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *recordDecoder) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

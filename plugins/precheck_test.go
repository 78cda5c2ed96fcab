package plugins

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

func leb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func section(id byte, payload ...[]byte) []byte {
	var p []byte
	for _, x := range payload {
		p = append(p, x...)
	}
	return append(append([]byte{id}, leb(uint64(len(p)))...), p...)
}

func module(sections ...[]byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

// bombs are tiny modules whose counts would make wazero's decoder allocate
// gigabytes; each must be refused before wazero sees it.
var bombs = []struct {
	name string
	wasm []byte
	want string
}{
	{
		// Found by FuzzLoad: 100 bytes that made wazero allocate 11 GB.
		name: "fuzz crasher: import count",
		wasm: []byte("\x00asm\x01\x00\x00\x00\x01*\a`\x02\x7f\x7f\x00`\x03\x7f\x7f\x7f\x00`\x02\x7f\x7f\x01\x7f`\x04\x7f\x7f\x7f\x7f\x01\x7f`\x00\x01\x7f`\x01\x7f\x01\x7f`\x03\x7f\x7f\x7f\x01\x7f\x02[\xff\xff\xff0"),
		want: "section 2",
	},
	{name: "import count 4G", wasm: module(section(2, leb(0xFFFFFFFF))), want: "length 4294967295 exceeds"},
	{name: "param count 4G", wasm: module(section(1, leb(1), []byte{0x60}, leb(0xFFFFFFFF))), want: "section 1"},
	{name: "data segment of 2 GiB", wasm: module(section(11, leb(1), leb(1), leb(0x7FFFFFFF))), want: "section 11"},
	{name: "table of 100M elements", wasm: module(section(4, leb(1), []byte{0x70, 0x00}, leb(100_000_000))), want: "more than the limit of 1048576"},
	{name: "name section with 4G functions", wasm: module(section(0, leb(4), []byte("name"), []byte{1}, leb(5), leb(0xFFFFFFFF))), want: "name section"},
	{name: "element vector 4G", wasm: module(section(9, leb(1), leb(1), []byte{0x00}, leb(0xFFFFFFFF))), want: "section 9"},
	{name: "section larger than the module", wasm: module([]byte{1}, leb(1000)), want: "exceeds the"},
}

func TestPrecheckRefusesAllocationBombs(t *testing.T) {
	t.Parallel()
	// A function declaring 4G locals, built separately for clarity.
	body := append(append(leb(1), leb(0xFFFFFFF0)...), 0x7f, 0x0b)
	locals := module(section(10, leb(1), leb(uint64(len(body))), body))
	cases := append(bombs[:len(bombs):len(bombs)], struct {
		name string
		wasm []byte
		want string
	}{name: "function with 4G locals", wasm: locals, want: "4294967280 locals, more than 50000"})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := precheck(tt.wasm, limits{functionBytes: 1 << 20, tableElements: 1 << 20})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("precheck: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestLoadingBombsAllocatesLittle is deliberately not parallel: it measures
// the process's allocations, and parallel tests only start after every
// sequential test has finished.
func TestLoadingBombsAllocatesLittle(t *testing.T) {
	ctx := context.Background()
	rt, err := New(ctx, Config{}, nopBlobs{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, tt := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := rt.Load(ctx, tt.wasm)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
			t.Errorf("%s: loading allocated %d MiB", tt.name, d>>20)
		}
	}
}

type nopBlobs struct{}

func (nopBlobs) Put(context.Context, string, []byte) error { return nil }
func (nopBlobs) Get(context.Context, string) ([]byte, error) {
	return nil, ErrNotFound
}
func (nopBlobs) Delete(context.Context, string) error { return nil }

// precheck reads LEB128 integers as wazero and the instrumenter do: a u32
// takes at most five bytes, and the unused bits of the fifth are zero. It
// used to accept a sixth byte, so that it and wazero disagreed on where a
// section ended.
func TestPrecheckRefusesOverlongLEB128(t *testing.T) {
	t.Parallel()
	typ := []byte{1, 0x60, 0, 0} // one type: () -> ()
	lim := limits{functionBytes: 1 << 20, tableElements: 1 << 20}
	for _, tt := range []struct {
		name string
		wasm []byte
		want string // "" if precheck accepts the module
	}{
		{name: "section size in 5 bytes", wasm: module([]byte{1, 0x84, 0x80, 0x80, 0x80, 0x00}, typ)},
		{name: "section size in 6 bytes", wasm: module([]byte{1, 0x84, 0x80, 0x80, 0x80, 0x80, 0x00}, typ), want: "LEB128 longer than 32 bits"},
		{name: "type count in 6 bytes", wasm: module(section(1, []byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x00}, typ[1:])), want: "LEB128 longer than 32 bits"},
		{name: "type count with unused bits set", wasm: module(section(1, []byte{0x81, 0x80, 0x80, 0x80, 0x10}, typ[1:])), want: "unused bits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := precheck(tt.wasm, lim)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("precheck: %v, want an error containing %q", err, tt.want)
			}
			// wazero agrees.
			ctx := context.Background()
			rt := wazero.NewRuntime(ctx)
			defer rt.Close(ctx)
			if _, err := rt.CompileModule(ctx, tt.wasm); (err == nil) != (tt.want == "") {
				t.Errorf("wazero: %v", err)
			}
		})
	}
}

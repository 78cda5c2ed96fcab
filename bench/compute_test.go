package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"
)

// cpuMeter measures the CPU time of the whole process (user and system,
// every thread: the guest, Go's garbage collector, wazero's goroutines)
// over a benchmark's loop. On a shared machine it is steadier than wall
// time, which also counts the time the benchmark waits for a core.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report reports the CPU time per op as cpu-ns/op; call it right after the
// b.Loop loop.
func (c cpuMeter) report(b *testing.B) {
	end, ok := processCPU()
	if c.ok && ok && b.N > 0 {
		b.ReportMetric(float64(end-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// A work is one compute-bound activity call of the compute benchmark.
type work struct {
	name     string
	plugin   func() []byte // the plugin's module, once TestMain has built it
	activity string
	input    func() []byte
	// check returns an error when out is not the call's expected output.
	check func(input, out []byte) error
}

var works = []work{
	{"upper-64KiB", func() []byte { return kitWasm }, "upper", upperInput, checkUpper},
	{"resize-800x600", func() []byte { return thumbnailWasm }, "resize", resizeInput, checkResize},
}

// BenchmarkCompute runs guest code that does real work, where the cost of
// stopping a guest at its deadline shows: the kit's upper on 64 KiB of text
// (strings.ToUpper over a decoded JSON string, then encoding it) and the
// thumbnail plugin's resize of an 800×600 PNG to 320×240 (PNG decoding,
// Catmull-Rom scaling in bands with a heartbeat after each, PNG encoding).
// Hosts are weft (the module instrumented at load), bare (the same module
// uninstrumented, with nothing to stop it: the floor), bare-close (bare
// with WithCloseOnContextDone(true), the way plugins.New stopped guests
// before) and bare-instr (bare with the module instrumented as weft's).
// Names are host=…/work=… for
//
//	benchstat -col /host results.txt
func BenchmarkCompute(b *testing.B) {
	for _, h := range weftHosts {
		for _, w := range works {
			b.Run("host="+h.name+"/work="+w.name, func(b *testing.B) {
				call := h.setup(b, w.plugin())
				input := w.input()
				ctx := context.Background()
				out, err := call(ctx, w.activity, input)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.check(input, out); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					if _, err := call(ctx, w.activity, input); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
		}
	}
}

// upperInput is {"text": …} of exactly 64 KiB, the text lower-case ASCII
// letters, digits and spaces.
func upperInput() []byte {
	const n = 64 << 10
	const alphabet = "abcdefghijklmnopqrstuvwxyz 0123456789 the quick brown fox jumps over the lazy dog "
	prefix, suffix := `{"text":"`, `"}`
	text := make([]byte, n-len(prefix)-len(suffix))
	for i := range text {
		text[i] = alphabet[i%len(alphabet)]
	}
	return []byte(prefix + string(text) + suffix)
}

func checkUpper(input, out []byte) error {
	var in, got struct{ Text string }
	if err := json.Unmarshal(input, &in); err != nil {
		return err
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("upper: %v", err)
	}
	if got.Text != strings.ToUpper(in.Text) {
		return fmt.Errorf("upper returned %d bytes of text that are not the input's %d upper-cased", len(got.Text), len(in.Text))
	}
	return nil
}

// resizeWidth and resizeHeight are the size resize is asked for (the
// height follows from the aspect ratio).
const resizeWidth, resizeHeight = 320, 240

// resizeInput is {"image": base64 PNG, "width": 320} with an 800×600 RGBA
// PNG whose pixels vary smoothly, with a little deterministic noise so that
// it does not compress to nothing (about as large as a photo's PNG).
func resizeInput() []byte {
	const w, h = 800, 600
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	seed := uint32(2463534242)
	for y := range h {
		for x := range w {
			seed ^= seed << 13 // xorshift32
			seed ^= seed >> 17
			seed ^= seed << 5
			noise := float64(seed%17) - 8
			fx, fy := float64(x)/w, float64(y)/h
			r := 128 + 100*math.Sin(6*fx+2*fy) + noise
			g := 128 + 100*math.Cos(5*fy-3*fx) + noise
			bl := 255 * (fx*fy + 0.1*math.Sin(40*fx)) // a stripe pattern
			img.SetRGBA(x, y, color.RGBA{R: clamp8(r), G: clamp8(g), B: clamp8(bl), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	input, err := json.Marshal(map[string]any{"image": buf.Bytes(), "width": resizeWidth})
	if err != nil {
		panic(err)
	}
	return input
}

func clamp8(v float64) uint8 { return uint8(max(0, min(255, math.Round(v)))) }

func checkResize(_, out []byte) error {
	var got struct {
		Image         string
		Width, Height int
		Format        string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("resize: %v", err)
	}
	data, err := base64.StdEncoding.DecodeString(got.Image)
	if err != nil {
		return fmt.Errorf("resize: %v", err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("resize: %v", err)
	}
	if got.Width != resizeWidth || got.Height != resizeHeight || got.Format != "png" ||
		cfg.Width != resizeWidth || cfg.Height != resizeHeight || format != "png" {
		return fmt.Errorf("resize returned a %d×%d %s (says %d×%d %s), want %d×%d png",
			cfg.Width, cfg.Height, format, got.Width, got.Height, got.Format, resizeWidth, resizeHeight)
	}
	return nil
}

package main_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// TestThumbnail runs every test of the plugin against one Runtime: wazero
// compiles the module once, which takes seconds under the race detector.
func TestThumbnail(t *testing.T) {
	t.Parallel()
	p := load(t)
	for _, tt := range []struct {
		name string
		test func(*testing.T, plugin)
	}{
		{"Resize", testResize},
		{"ResizeKeepsTheGradient", testResizeKeepsTheGradient},
		{"ResizeHeartbeats", testResizeHeartbeats},
		{"ResizeCancelled", testResizeCancelled},
		{"BadInput", testBadInput},
		{"Info", testInfo},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, p)
		})
	}
}

// plugin is the thumbnail plugin loaded into a Runtime.
type plugin struct {
	rt      *plugins.Runtime
	version string
}

// load returns the thumbnail plugin in a Runtime over a blob store in a
// temporary directory, closed when the test ends.
func load(t *testing.T) plugin {
	t.Helper()
	// The cancellation tests are about the guest noticing cancellation at
	// its next heartbeat; under a loaded CI machine a band can take seconds,
	// so the host's grace period must not end first.
	rt := testplugins.Runtime(t, plugins.Config{CancelGrace: 5 * time.Minute})
	return plugin{rt: rt, version: testplugins.Load(t, rt, "thumbnail")}
}

func (p plugin) invoke(call call.Call) ([]byte, error) {
	return p.rt.Invoke(context.Background(), p.version, call)
}

// gradient is a w×h image whose red rises from left to right and green from
// top to bottom, so that a resized copy can be checked pixel by pixel.
func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{R: ramp(float64(x), w), G: ramp(float64(y), h), B: 128, A: 255})
		}
	}
	return img
}

// ramp is the gradient's value at coordinate c of n pixels.
func ramp(c float64, n int) uint8 {
	return uint8(c*255/float64(n-1) + 0.5)
}

func encodePNG(t *testing.T, img image.Image) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func encodeJPEG(t *testing.T, img image.Image) string {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// input encodes a resize or info input.
func input(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type resizeOut struct {
	Image  []byte `json:"image"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
	Bytes  int    `json:"bytes"`
}

func testResize(t *testing.T, p plugin) {
	pngImg := encodePNG(t, gradient(300, 200))
	jpegImg := encodeJPEG(t, gradient(300, 200))

	tests := []struct {
		name       string
		in         map[string]any
		wantW      int
		wantH      int
		wantFormat string
	}{
		{name: "width keeps aspect", in: map[string]any{"image": pngImg, "width": 150}, wantW: 150, wantH: 100, wantFormat: "png"},
		{name: "height keeps aspect", in: map[string]any{"image": pngImg, "height": 50}, wantW: 75, wantH: 50, wantFormat: "png"},
		{name: "both stretch", in: map[string]any{"image": pngImg, "width": 40, "height": 90}, wantW: 40, wantH: 90, wantFormat: "png"},
		{name: "upscale", in: map[string]any{"image": pngImg, "width": 450}, wantW: 450, wantH: 300, wantFormat: "png"},
		{name: "one pixel", in: map[string]any{"image": pngImg, "width": 1, "height": 1}, wantW: 1, wantH: 1, wantFormat: "png"},
		{name: "png to jpeg", in: map[string]any{"image": pngImg, "width": 120, "format": "jpeg", "quality": 80}, wantW: 120, wantH: 80, wantFormat: "jpeg"},
		{name: "jpg is jpeg", in: map[string]any{"image": pngImg, "width": 120, "format": "jpg"}, wantW: 120, wantH: 80, wantFormat: "jpeg"},
		{name: "jpeg keeps jpeg", in: map[string]any{"image": jpegImg, "width": 60}, wantW: 60, wantH: 40, wantFormat: "jpeg"},
		{name: "jpeg to png", in: map[string]any{"image": jpegImg, "width": 60, "format": "png"}, wantW: 60, wantH: 40, wantFormat: "png"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := p.invoke(call.Call{Activity: "resize", Input: input(t, tt.in)})
			if err != nil {
				t.Fatal(err)
			}
			var out resizeOut
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("output %.200s: %v", b, err)
			}
			if out.Width != tt.wantW || out.Height != tt.wantH || out.Format != tt.wantFormat || out.Bytes != len(out.Image) {
				t.Errorf("got %d×%d %s of %d bytes (image %d bytes), want %d×%d %s",
					out.Width, out.Height, out.Format, out.Bytes, len(out.Image), tt.wantW, tt.wantH, tt.wantFormat)
			}
			img, format, err := image.Decode(bytes.NewReader(out.Image))
			if err != nil {
				t.Fatalf("decoding the result: %v", err)
			}
			if got := img.Bounds().Size(); got != image.Pt(tt.wantW, tt.wantH) || format != tt.wantFormat {
				t.Errorf("result decodes as %v %s, want %d×%d %s", got, format, tt.wantW, tt.wantH, tt.wantFormat)
			}
		})
	}
}

// testResizeKeepsTheGradient checks every pixel of a result that took
// several bands in both passes: a seam between bands, or a band scaled
// with the wrong geometry, shows up as a pixel off the gradient.
func testResizeKeepsTheGradient(t *testing.T, p plugin) {
	const sw, sh, dw, dh = 330, 520, 150, 260
	in := input(t, map[string]any{"image": encodePNG(t, gradient(sw, sh)), "width": dw, "height": dh})
	b, err := p.invoke(call.Call{Activity: "resize", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	var out resizeOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(out.Image))
	if err != nil {
		t.Fatal(err)
	}
	// The filter reproduces a linear ramp except within its reach of an
	// edge, where it sees only one side.
	const margin, tolerance = 3, 2
	bad := 0
	for y := margin; y < dh-margin; y++ {
		for x := margin; x < dw-margin; x++ {
			sx := (float64(x)+0.5)*sw/dw - 0.5
			sy := (float64(y)+0.5)*sh/dh - 0.5
			r, g, _, _ := img.At(x, y).RGBA()
			if diff(uint8(r>>8), ramp(sx, sw)) > tolerance || diff(uint8(g>>8), ramp(sy, sh)) > tolerance {
				if bad++; bad <= 5 {
					t.Errorf("pixel (%d,%d) is r=%d g=%d, want about r=%d g=%d", x, y, r>>8, g>>8, ramp(sx, sw), ramp(sy, sh))
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d pixels off the gradient in all", bad)
	}
}

func diff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

func testResizeHeartbeats(t *testing.T, p plugin) {
	hb := call.NewHeartbeat(time.Now())
	in := input(t, map[string]any{"image": encodePNG(t, gradient(200, 300)), "height": 200})
	if _, err := p.invoke(call.Call{Activity: "resize", Input: in, Heartbeat: hb}); err != nil {
		t.Fatal(err)
	}
	details, _, beats := hb.Last()
	// 200 result rows are 4 bands of 64.
	if beats < 4 {
		t.Errorf("%d heartbeats, want at least one per band of 64 result rows (4)", beats)
	}
	var progress struct {
		RowsDone *int `json:"rows_done"`
		Rows     *int `json:"rows"`
	}
	if err := json.Unmarshal(details, &progress); err != nil || progress.RowsDone == nil || progress.Rows == nil {
		t.Fatalf("last details %s, want {rows_done, rows}", details)
	}
	if *progress.RowsDone != 200 || *progress.Rows != 200 {
		t.Errorf("last details %s, want rows_done and rows 200", details)
	}
}

func testResizeCancelled(t *testing.T, p plugin) {
	in := input(t, map[string]any{"image": encodePNG(t, gradient(2000, 2000)), "width": 1900})

	t.Run("mid-way", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		done := make(chan error, 1)
		go func() {
			_, err := p.invoke(call.Call{Activity: "resize", Input: in, Heartbeat: hb})
			done <- err
		}()
		waitFor(t, 30*time.Second, func() bool { _, _, beats := hb.Last(); return beats > 0 })
		hb.RequestCancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("resize did not stop after cancellation")
		}
		// The guest stopped itself (a cancelled failure), well before the
		// grace period would have stopped it.
		var ge *call.GuestError
		if !errors.Is(err, call.ErrCancelled) || !errors.As(err, &ge) {
			t.Fatalf("error %v, want the guest's cancelled failure", err)
		}
		if details, _, _ := hb.Last(); strings.Contains(string(details), `"rows_done":1900`) {
			t.Errorf("details %s: resize finished its rows before it noticed the cancellation", details)
		}
	})
	t.Run("before the first band", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		hb.RequestCancel()
		_, err := p.invoke(call.Call{Activity: "resize", Input: in, Heartbeat: hb})
		var ge *call.GuestError
		if !errors.Is(err, call.ErrCancelled) || !errors.As(err, &ge) {
			t.Fatalf("error %v, want the guest's cancelled failure", err)
		}
		if _, _, beats := hb.Last(); beats != 1 {
			t.Errorf("%d heartbeats, want the guest to stop at the first", beats)
		}
	})
}

func testBadInput(t *testing.T, p plugin) {
	img := encodePNG(t, gradient(40, 4))

	tests := []struct {
		name     string
		activity string
		input    string
		wantCode string
		// wantMessage is part of the message that names what was wrong.
		wantMessage string
	}{
		{name: "no image", activity: "resize", input: `{"width":10}`, wantCode: "bad_image", wantMessage: "missing"},
		{name: "not base64", activity: "resize", input: `{"image":"%%%","width":10}`, wantCode: "bad_image", wantMessage: "not base64"},
		{name: "not an image", activity: "resize", input: `{"image":"` + base64.StdEncoding.EncodeToString([]byte("GIF89a, sort of")) + `","width":10}`, wantCode: "bad_image", wantMessage: "not a PNG or JPEG"},
		{name: "truncated png", activity: "resize", input: `{"image":"` + img[:len(img)/2/4*4] + `","width":10}`, wantCode: "bad_image", wantMessage: "png"},
		{name: "no size", activity: "resize", input: `{"image":"` + img + `"}`, wantCode: "bad_size", wantMessage: "width, height or both"},
		{name: "zero width", activity: "resize", input: `{"image":"` + img + `","width":0}`, wantCode: "bad_size", wantMessage: "width 0"},
		{name: "negative height", activity: "resize", input: `{"image":"` + img + `","height":-5}`, wantCode: "bad_size", wantMessage: "height -5"},
		{name: "too wide", activity: "resize", input: `{"image":"` + img + `","width":8193}`, wantCode: "bad_size", wantMessage: "width 8193"},
		{name: "aspect too tall", activity: "resize", input: `{"image":"` + img + `","height":820}`, wantCode: "bad_size", wantMessage: "width 8200"},
		{name: "unknown format", activity: "resize", input: `{"image":"` + img + `","width":10,"format":"gif"}`, wantCode: "bad_format", wantMessage: `"gif"`},
		{name: "quality 0", activity: "resize", input: `{"image":"` + img + `","width":10,"format":"jpeg","quality":0}`, wantCode: "bad_quality", wantMessage: "quality 0"},
		{name: "quality 101", activity: "resize", input: `{"image":"` + img + `","width":10,"format":"jpeg","quality":101}`, wantCode: "bad_quality", wantMessage: "quality 101"},
		{name: "width not a number", activity: "resize", input: `{"image":"` + img + `","width":"ten"}`, wantCode: "bad_input", wantMessage: "width"},
		{name: "info not base64", activity: "info", input: `{"image":"@@"}`, wantCode: "bad_image", wantMessage: "not base64"},
		{name: "info not an image", activity: "info", input: `{"image":"aGVsbG8="}`, wantCode: "bad_image", wantMessage: "not a PNG or JPEG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.invoke(call.Call{Activity: tt.activity, Input: []byte(tt.input)})
			var ge *call.GuestError
			if !errors.As(err, &ge) {
				t.Fatalf("error %v, want a *GuestError", err)
			}
			if ge.Code != tt.wantCode || ge.Retryable || !strings.Contains(ge.Message, tt.wantMessage) {
				t.Errorf("got %+v, want non-retryable %s with a message containing %q", ge, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

func testInfo(t *testing.T, p plugin) {
	tests := []struct {
		name  string
		image string
		want  string
	}{
		{name: "png", image: encodePNG(t, gradient(31, 17)), want: `{"width":31,"height":17,"format":"png"}`},
		{name: "jpeg", image: encodeJPEG(t, gradient(64, 48)), want: `{"width":64,"height":48,"format":"jpeg"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := p.invoke(call.Call{Activity: "info", Input: input(t, map[string]any{"image": tt.image})})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("output %s, want %s", out, tt.want)
			}
		})
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(time.Millisecond)
	}
}

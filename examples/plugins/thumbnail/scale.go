package main

import (
	"image"

	"golang.org/x/image/draw"

	"github.com/weftworks/weft/sdk"
)

// band is how many columns or rows scale works through between two
// heartbeats.
const band = 64

// progress is resize's heartbeat details.
type progress struct {
	RowsDone int `json:"rows_done"`
	Rows     int `json:"rows"`
}

// scale resizes src to w×h with the Catmull-Rom filter. It heartbeats after
// every band and returns sdk.ErrCancelled as soon as a heartbeat reports
// cancellation.
//
// # Notes
//
// A resampling filter is separable, and so is the work: scale first resizes
// vertically into an image as wide as src and h high, band by band of
// columns, then horizontally into the result, band by band of output rows.
// In each pass a band maps one axis 1:1, which the filter leaves unchanged,
// so the bands join without seams and no pixel is filtered twice. (Scaling
// both axes of a band in one call would not do: draw's scaler filters every
// source row for each call.) The first pass heartbeats without details; the
// second records {"rows_done", "rows"} of the result.
func scale(ctx *sdk.Context, src image.Image, w, h int) (*image.RGBA, error) {
	sb := src.Bounds()
	sw, sh := sb.Dx(), sb.Dy()

	mid := image.NewRGBA(image.Rect(0, 0, sw, h))
	vertical := draw.CatmullRom.NewScaler(band, h, band, sh)
	for x := 0; x < sw; x += band {
		x1 := min(x+band, sw)
		vertical.Scale(mid, image.Rect(x, 0, x1, h), src, image.Rect(sb.Min.X+x, sb.Min.Y, sb.Min.X+x1, sb.Max.Y), draw.Src, nil)
		if ctx.Heartbeat(nil) {
			return nil, sdk.ErrCancelled
		}
	}

	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	horizontal := draw.CatmullRom.NewScaler(w, band, sw, band)
	for y := 0; y < h; y += band {
		y1 := min(y+band, h)
		horizontal.Scale(dst, image.Rect(0, y, w, y1), mid, image.Rect(0, y, sw, y1), draw.Src, nil)
		if ctx.Heartbeat(progress{RowsDone: y1, Rows: h}) {
			return nil, sdk.ErrCancelled
		}
	}
	return dst, nil
}

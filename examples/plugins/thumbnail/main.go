// Command thumbnail is a Weft plugin that resizes PNG and JPEG images.
//
// Activities:
//
//   - resize: {"image": base64, "width", "height", "format", "quality"}
//     -> {"image": base64, "width", "height", "format", "bytes"}
//   - info: {"image": base64} -> {"width", "height", "format"}
//
// See README.md beside this file. Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o thumbnail.wasm .
//	tinygo build -target=wasip1 -buildmode=c-shared -o thumbnail.wasm .
package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"

	"golang.org/x/image/draw"

	"github.com/weftworks/weft/sdk"
)

func init() {
	sdk.RegisterWithDescription("resize",
		"Resizes a base64 PNG or JPEG to width×height (keeping the aspect ratio when one is left out), heartbeating its progress.",
		sdk.Typed(resize))
	sdk.RegisterWithDescription("info", "Reports the width, height and format of a base64 PNG or JPEG.", sdk.Typed(info))
}

func main() {}

// Failure codes. Each is non-retryable: the same input fails the same way.
const (
	codeBadImage   = "bad_image"
	codeBadSize    = "bad_size"
	codeBadFormat  = "bad_format"
	codeBadQuality = "bad_quality"
)

const (
	// maxSide bounds the width and height of the result and of the image
	// accepted for resizing.
	maxSide = 8192
	// defaultQuality is the JPEG quality used when the input gives none.
	defaultQuality = 85
)

type resizeIn struct {
	// Image is a PNG or JPEG, base64 (standard alphabet, padded).
	Image string `json:"image"`
	// Width and Height are the result's size in pixels, 1 to maxSide. When
	// one is absent it is computed from the other and the image's aspect
	// ratio; when both are given the image is stretched to fit them.
	Width  *int `json:"width"`
	Height *int `json:"height"`
	// Format is "png" or "jpeg" ("jpg" is accepted); empty keeps the input's
	// format.
	Format string `json:"format"`
	// Quality is the JPEG quality, 1 to 100; nil means defaultQuality. PNG
	// ignores it.
	Quality *int `json:"quality"`
}

type resizeOut struct {
	// Image is the result; encoding/json writes a []byte as base64.
	Image  []byte `json:"image"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
	// Bytes is the size of the result before base64.
	Bytes int `json:"bytes"`
}

func resize(ctx *sdk.Context, in resizeIn) (resizeOut, error) {
	// Check what needs no decoding first: a mistake there costs nothing.
	format, err := outputFormat(in.Format)
	if err != nil {
		return resizeOut{}, err
	}
	quality := defaultQuality
	if in.Quality != nil {
		if q := *in.Quality; q < 1 || q > 100 {
			return resizeOut{}, sdk.NonRetryable(codeBadQuality, fmt.Sprintf("quality %d is outside 1-100", q))
		}
		quality = *in.Quality
	}
	if err := checkSide("width", in.Width); err != nil {
		return resizeOut{}, err
	}
	if err := checkSide("height", in.Height); err != nil {
		return resizeOut{}, err
	}
	if in.Width == nil && in.Height == nil {
		return resizeOut{}, sdk.NonRetryable(codeBadSize, "give width, height or both")
	}

	data, err := decodeBase64(in.Image)
	if err != nil {
		return resizeOut{}, err
	}
	cfg, srcFormat, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return resizeOut{}, notAnImage(err)
	}
	if cfg.Width > maxSide || cfg.Height > maxSide {
		return resizeOut{}, sdk.NonRetryable(codeBadImage,
			fmt.Sprintf("image is %d×%d; the largest accepted is %d×%d", cfg.Width, cfg.Height, maxSide, maxSide))
	}
	w, h, err := targetSize(cfg.Width, cfg.Height, in.Width, in.Height)
	if err != nil {
		return resizeOut{}, err
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return resizeOut{}, sdk.NonRetryable(codeBadImage, fmt.Sprintf("decoding the %s image: %v", srcFormat, err))
	}
	if format == "" {
		format = srcFormat
	}

	dst, err := scale(ctx, src, w, h)
	if err != nil {
		return resizeOut{}, err
	}
	out, err := encode(dst, format, quality)
	if err != nil {
		return resizeOut{}, err
	}
	return resizeOut{Image: out, Width: w, Height: h, Format: format, Bytes: len(out)}, nil
}

type infoIn struct {
	Image string `json:"image"`
}

type infoOut struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
}

// info reads only the image's header.
func info(_ *sdk.Context, in infoIn) (infoOut, error) {
	data, err := decodeBase64(in.Image)
	if err != nil {
		return infoOut{}, err
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return infoOut{}, notAnImage(err)
	}
	return infoOut{Width: cfg.Width, Height: cfg.Height, Format: format}, nil
}

func decodeBase64(s string) ([]byte, error) {
	if s == "" {
		return nil, sdk.NonRetryable(codeBadImage, "image is missing: give a PNG or JPEG as base64")
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, sdk.NonRetryable(codeBadImage, "image is not base64: "+err.Error())
	}
	return data, nil
}

func notAnImage(err error) error {
	return sdk.NonRetryable(codeBadImage, "image is not a PNG or JPEG: "+err.Error())
}

func outputFormat(f string) (string, error) {
	switch f {
	case "":
		return "", nil
	case "png":
		return "png", nil
	case "jpeg", "jpg":
		return "jpeg", nil
	}
	return "", sdk.NonRetryable(codeBadFormat, fmt.Sprintf("format %q is not png or jpeg", f))
}

func checkSide(name string, v *int) error {
	if v != nil && (*v < 1 || *v > maxSide) {
		return sdk.NonRetryable(codeBadSize, fmt.Sprintf("%s %d is outside 1-%d", name, *v, maxSide))
	}
	return nil
}

// targetSize returns the result's size for a sw×sh image; w and h have
// passed checkSide and are not both nil.
func targetSize(sw, sh int, w, h *int) (int, int, error) {
	switch {
	case w != nil && h != nil:
		return *w, *h, nil
	case w != nil:
		height := keepAspect(*w, sh, sw)
		if height > maxSide {
			return 0, 0, sdk.NonRetryable(codeBadSize,
				fmt.Sprintf("width %d keeps the aspect ratio of a %d×%d image with height %d, more than %d", *w, sw, sh, height, maxSide))
		}
		return *w, height, nil
	default:
		width := keepAspect(*h, sw, sh)
		if width > maxSide {
			return 0, 0, sdk.NonRetryable(codeBadSize,
				fmt.Sprintf("height %d keeps the aspect ratio of a %d×%d image with width %d, more than %d", *h, sw, sh, width, maxSide))
		}
		return width, *h, nil
	}
}

// keepAspect returns side × num / den, rounded, and at least 1.
func keepAspect(side, num, den int) int {
	return max(1, int(math.Round(float64(side)*float64(num)/float64(den))))
}

func encode(img *image.RGBA, format string, quality int) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&buf, img)
	case "jpeg":
		// JPEG has no alpha: lay transparent pixels on white rather than
		// let them turn black.
		if !img.Opaque() {
			img = onWhite(img)
		}
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality})
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", format, err)
	}
	return buf.Bytes(), nil
}

func onWhite(img *image.RGBA) *image.RGBA {
	r := img.Bounds()
	bg := image.NewRGBA(r)
	draw.Draw(bg, r, image.White, image.Point{}, draw.Src)
	draw.Draw(bg, r, img, r.Min, draw.Over)
	return bg
}

package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// TestHandlersReadTheRawBody: requireType and decodeJSON read the body
// raw, as the bodies middleware left it. Should a Content-Encoding header
// ever reach them, they still do not inflate the body (c.Body() would):
// gzipped JSON is malformed JSON to them.
func TestHandlersReadTheRawBody(t *testing.T) {
	t.Parallel()
	app := fiber.New(fiber.Config{Immutable: true, DisableStartupMessage: true})
	app.Post("/", func(c *fiber.Ctx) error {
		var v map[string]any
		if err := decodeJSON(c, &v); err != nil {
			return c.Status(http.StatusBadRequest).SendString(err.Error())
		}
		return c.JSON(v)
	})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(`{"a": 1}`)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(gz.Bytes()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "malformed JSON") {
		t.Fatalf("gzipped JSON with Content-Encoding: gzip: %d %s; want it read raw, as malformed JSON", res.StatusCode, body)
	}
	if err := app.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

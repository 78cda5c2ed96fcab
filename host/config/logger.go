package config

import (
	"io"
	"log/slog"

	"github.com/weftworks/weft/internal/tracing"
)

// Logger is the host's own log on w, at log.level in log.format. With
// tracing on, a line logged with a context inside a span carries the
// span's trace_id and span_id (tracing.LogHandler); with it off, the
// handler is the plain one.
func (c *Loaded) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevel(c.Log.Level)}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.Log.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	if c.Tracing.Exporter == tracing.ExporterOTLP {
		h = tracing.LogHandler(h)
	}
	return slog.New(h)
}

// logLevel is log.level's slog level; Load refused any other name.
func logLevel(name string) slog.Level {
	switch name {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

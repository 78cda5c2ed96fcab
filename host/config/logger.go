package config

import (
	"io"
	"log/slog"
)

// Logger is the host's own log on w, at log.level in log.format.
func (c *Loaded) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevel(c.Log.Level)}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
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

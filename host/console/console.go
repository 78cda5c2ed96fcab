// Package console is Weft's web console: the pages that `weft serve`
// answers at / and /assets/, to search, inspect, start, signal, cancel,
// pause, reset and migrate instances, apply an operation to every
// instance a query matches as a batch job and follow its progress, read
// workflows and plugins, follow, pause, trigger and backfill schedules,
// and see the concurrency keys with their holders and lines, the rate
// limit keys, the queued events and the dead letters, all through the
// HTTP API under /v1 (docs/architecture.md, "The console").
//
// It is plain files: an index.html, one stylesheet and JavaScript modules,
// embedded in the binary as they are written. No build step turns them
// into something else, nothing is fetched from elsewhere at run time (no
// CDN, no web fonts), and what is in assets/ is exactly what a browser
// runs. The package only hands the files over; host/api serves them,
// with their content types, security headers and ETags.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"sync"
)

//go:embed assets
var embedded embed.FS

// Assets returns the console's files, rooted at the directory that holds
// index.html: "index.html", "app.css", "js/app.js" and so on.
func Assets() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return sub
}

// File is one asset, ready to serve.
type File struct {
	// Body is the file's content.
	Body []byte
	// ContentType is its media type, with a charset for text.
	ContentType string
	// ETag is a strong entity tag made of the SHA-256 of Body, quoted:
	// it changes with the content, so a browser that revalidates never
	// keeps a file of an earlier version.
	ETag string
}

// contentTypes are the media types of the extensions the console uses.
// A file of another extension is not served: the table is explicit
// rather than the system's mime database, which differs between machines.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

var (
	filesOnce sync.Once
	files     map[string]File
)

// Lookup returns the asset at name ("index.html", "js/app.js"), and false
// when there is none or its extension is not one the console serves.
// Names are slash-separated and relative; "..", "." and empty elements
// find nothing.
func Lookup(name string) (File, bool) {
	filesOnce.Do(load)
	f, ok := files[name]
	return f, ok
}

// load reads every asset once, with its type and ETag.
func load() {
	files = map[string]File{}
	root := Assets()
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[strings.ToLower(path.Ext(name))]
		if !ok {
			return nil
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[name] = File{Body: body, ContentType: ct, ETag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // an embedded file system does not fail to read
	}
}

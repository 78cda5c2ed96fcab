package api

import (
	"io/fs"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/console"
)

// consoleCSP is the Content-Security-Policy of the console's files: its
// own scripts, styles and API only, no inline script or style, nothing
// from elsewhere, never framed. A script that an injected string managed
// to put in the page would not run.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// consoleIndex serves the console's page at /. It is public: the page
// holds no data, and asks for a token when the API answers 401.
func (s *Server) consoleIndex(c *fiber.Ctx) error {
	return serveAsset(c, "index.html")
}

// consoleAsset serves /assets/<name>, the console's scripts and styles.
func (s *Server) consoleAsset(c *fiber.Ctx) error {
	name := param(c, "*1")
	if !fs.ValidPath(name) {
		return notFoundf("no console asset %q", name)
	}
	return serveAsset(c, name)
}

// serveAsset answers the console file name with its type and the security
// headers. Caching: every answer must be revalidated (no-cache) and
// carries an ETag made of the content's hash, so a browser keeps a file
// only as long as it is the one this binary embeds, and an upgrade never
// leaves an old script running with a new page; an unchanged file costs
// a 304.
func serveAsset(c *fiber.Ctx, name string) error {
	f, ok := console.Lookup(name)
	if !ok {
		return notFoundf("no console asset %q", name)
	}
	c.Set(fiber.HeaderContentSecurityPolicy, consoleCSP)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderETag, f.ETag)
	if etagMatches(c.Get(fiber.HeaderIfNoneMatch), f.ETag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, f.ContentType)
	return c.Send(f.Body)
}

// etagMatches reports whether an If-None-Match header names etag (or is
// "*"), weak forms included, as RFC 9110 compares for GET.
func etagMatches(header, etag string) bool {
	for len(header) > 0 {
		var tag string
		i := 0
		for i < len(header) && (header[i] == ' ' || header[i] == ',') {
			i++
		}
		header = header[i:]
		j := 0
		for j < len(header) && header[j] != ',' {
			j++
		}
		tag, header = header[:j], header[j:]
		for len(tag) > 0 && tag[len(tag)-1] == ' ' {
			tag = tag[:len(tag)-1]
		}
		if tag == "*" || tag == etag || tag == "W/"+etag {
			return true
		}
	}
	return false
}

package console

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
)

// references are the src and href attributes of index.html.
var references = regexp.MustCompile(`(?i)\b(src|href)\s*=\s*"([^"]*)"`)

func indexHTML(t *testing.T) string {
	t.Helper()
	f, ok := Lookup("index.html")
	if !ok {
		t.Fatal("no index.html")
	}
	if f.ContentType != "text/html; charset=utf-8" {
		t.Fatalf("index.html is %q", f.ContentType)
	}
	return string(f.Body)
}

// TestIndexReferencesExist: every file index.html names is an embedded
// asset, and nothing is loaded from elsewhere.
func TestIndexReferencesExist(t *testing.T) {
	html := indexHTML(t)
	n := 0
	for _, m := range references.FindAllStringSubmatch(html, -1) {
		ref := m[2]
		if strings.HasPrefix(ref, "#") {
			continue // a route of the console
		}
		name, ok := strings.CutPrefix(ref, "/assets/")
		if !ok {
			t.Errorf("index.html %s=%q: not an embedded asset (/assets/...); the console loads nothing from elsewhere", m[1], ref)
			continue
		}
		if _, ok := Lookup(name); !ok {
			t.Errorf("index.html %s=%q: no such asset", m[1], ref)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("index.html references %d assets; want the stylesheet, the icon and the script at least", n)
	}
}

// TestNoInlineCode: the CSP allows no inline script or style, so
// index.html has none, and no script builds HTML from strings (which
// would also open the page to injection from what the API answers).
func TestNoInlineCode(t *testing.T) {
	html := indexHTML(t)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?is)<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`(?i)<script\b(?:[^>](?:[^s]|s[^r]|sr[^c]))*>`),
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)javascript:`),
	} {
		if loc := bad.FindStringIndex(html); loc != nil {
			t.Errorf("index.html has inline code the CSP refuses: %q", html[loc[0]:min(loc[1]+20, len(html))])
		}
	}
	risky := regexp.MustCompile(`\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setAttribute\(\s*['"]style['"]`)
	err := fs.WalkDir(Assets(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".js") {
			return err
		}
		b, _ := fs.ReadFile(Assets(), name)
		for i, line := range strings.Split(string(b), "\n") {
			if risky.MatchString(line) {
				t.Errorf("%s:%d: %s", name, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestModulesParseAndResolve: the module scripts of index.html, and every
// module they import, parse as JavaScript modules and import only
// embedded files (relative paths: no package names, no URLs); and every
// embedded .js file is part of that graph.
func TestModulesParseAndResolve(t *testing.T) {
	html := indexHTML(t)
	dir := t.TempDir()
	err := fs.WalkDir(Assets(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, name), 0o755)
		}
		b, err := fs.ReadFile(Assets(), name)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, m := range regexp.MustCompile(`(?i)<script\s+type="module"\s+src="/assets/([^"]+)"`).FindAllStringSubmatch(html, -1) {
		entries = append(entries, filepath.Join(dir, m[1]))
	}
	if len(entries) == 0 {
		t.Fatal("index.html loads no module script")
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:   entries,
		Bundle:        true,
		Write:         false,
		Format:        api.FormatESModule,
		Target:        api.ES2022,
		Platform:      api.PlatformBrowser,
		Outdir:        filepath.Join(dir, "out"),
		Metafile:      true,
		LogLevel:      api.LogLevelSilent,
		AbsWorkingDir: dir,
	})
	for _, e := range res.Errors {
		where := ""
		if e.Location != nil {
			where = e.Location.File + ":" + strconv.Itoa(e.Location.Line) + ": "
		}
		t.Errorf("%s%s", where, e.Text)
	}
	if len(res.Errors) > 0 {
		return
	}
	// Every .js file must be reached from index.html: an unreachable one
	// would be shipped and never parsed by a browser.
	err = fs.WalkDir(Assets(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".js") {
			return err
		}
		if !strings.Contains(res.Metafile, `"`+name+`"`) {
			t.Errorf("%s is embedded but no module imports it", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLookup: assets have their types and content-hash ETags; names that
// leave the directory, or name a directory, find nothing.
func TestLookup(t *testing.T) {
	css, ok := Lookup("app.css")
	if !ok || css.ContentType != "text/css; charset=utf-8" || len(css.ETag) != 34 {
		t.Fatalf("app.css: %v %+v", ok, css)
	}
	js, ok := Lookup("js/app.js")
	if !ok || js.ContentType != "text/javascript; charset=utf-8" || js.ETag == css.ETag {
		t.Fatalf("js/app.js: %v %+v", ok, js.ContentType)
	}
	for _, name := range []string{"", ".", "js", "../console.go", "/index.html", "js/../app.css", "console.go"} {
		if _, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) found a file", name)
		}
	}
}

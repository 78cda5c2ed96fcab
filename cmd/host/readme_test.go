package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/doctest"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestReadmeConfigurationExample loads the README's example weft.yaml.
func TestReadmeConfigurationExample(t *testing.T) {
	t.Parallel()
	section := doctest.Section(t, "README.md", "## Configuration")
	start := strings.Index(section, "```yaml\n# weft.yaml\n")
	if start < 0 {
		t.Fatal("the README's configuration section has no weft.yaml example")
	}
	example := section[start+len("```yaml\n"):]
	example = example[:strings.Index(example, "```")]
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", example)
	cfg, err := config.Load(parseHostFlags(t).sources(dir, nil))
	if err != nil {
		t.Fatalf("the README's example does not load: %v\n%s", err, example)
	}
	if len(cfg.Auth.Tokens) == 0 || checkListen(cfg) != nil {
		t.Errorf("the README's example should listen beyond loopback with tokens: listen %s, %d tokens", cfg.Listen, len(cfg.Auth.Tokens))
	}
}

// TestReadmeCommandLine keeps the README's command table in step with the
// commands: each is in it, with each of its flags but those every client
// command has and the paging ones, and every exit code is in the table of
// exit codes.
func TestReadmeCommandLine(t *testing.T) {
	t.Parallel()
	section := doctest.Section(t, "README.md", "## The command line")
	lines := strings.Split(section, "\n")
	ts := &testServer{url: "http://127.0.0.1:1"} // help asks no server
	flagRE := regexp.MustCompile(`(?m)^  (-[a-z-]+)`)
	for name := range (&app{}).commands() {
		group, verb, _ := strings.Cut(name, " ")
		var row string
		for _, l := range lines {
			if strings.HasPrefix(l, "| `weft "+name) || strings.HasPrefix(l, "| `weft "+group+" ") && (strings.Contains(l, "`"+verb+" ") || strings.Contains(l, "`"+verb+"`")) {
				row += l
			}
		}
		if row == "" {
			t.Errorf("README.md's command table has no row for weft %s", name)
			continue
		}
		r := ts.weft(t, nil, append(strings.Fields(name), "-h")...)
		for _, m := range flagRE.FindAllStringSubmatch(r.stdout, -1) {
			switch flag := strings.TrimLeft(m[1], "-"); flag {
			case "server", "token", "o", "output", "limit", "cursor", "input", "attempt", "last-heartbeat", "timeout", "cancel-at-heartbeat", "module", "sdk":
				// Common, or plugin call's and plugin new's, which their -h lists.
			default:
				if !regexp.MustCompile("[ `\\[]--?" + regexp.QuoteMeta(flag) + `\b`).MatchString(row) {
					t.Errorf("README.md's row of weft %s does not name its -%s:\n%s", name, flag, row)
				}
			}
		}
	}
	for _, code := range []int{exitOK, exitFailed, exitUsage, exitInternal, exitNotFound, exitAuth, exitPending, exitInterrupted} {
		if !strings.Contains(section, "\n| "+strconv.Itoa(code)+" | ") {
			t.Errorf("README.md's exit codes have no row for %d", code)
		}
	}
}

// TestExampleWorkflowsReadmeListsKit: examples/workflows/README.md lists
// every activity the kit plugin registers.
func TestExampleWorkflowsReadmeListsKit(t *testing.T) {
	t.Parallel()
	root := testplugins.Root(t)
	src, err := os.ReadFile(filepath.Join(root, "examples", "plugins", "kit", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "examples", "workflows", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	activities := regexp.MustCompile(`sdk\.Register\w*\("([a-z0-9_-]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(activities) == 0 {
		t.Fatal("kit registers no activity")
	}
	for _, m := range activities {
		if !strings.Contains(string(readme), "| `"+m[1]+"` |") {
			t.Errorf("examples/workflows/README.md's table of kit's activities lacks %s", m[1])
		}
	}
}

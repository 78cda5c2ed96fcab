package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/weftworks/weft/abi"
)

// `weft plugin new NAME` writes a plugin module ready to build, test and
// push: what a newcomer would otherwise assemble from the SDK's README.

// scaffold holds the files it writes, as templates: NAME.tmpl becomes NAME
// (gitignore.tmpl becomes .gitignore, demo.yaml.tmpl the plugin's
// PLUGIN-demo.yaml workflow). They are not .go or go.mod files,
// so that the go command does not take them for the host's sources or for
// a module of their own.
//
//go:embed scaffold/*.tmpl
var scaffold embed.FS

// sdkModule is the SDK's module path, which a scaffold's go.mod requires.
const sdkModule = "github.com/weftworks/weft/sdk"

// scaffoldData fills the templates.
type scaffoldData struct {
	// Name is the plugin's name, which is also the .wasm file's.
	Name string
	// Module is the Go module path.
	Module string
	// SDK is the directory the replace directive points at; empty writes
	// no replace.
	SDK string
	// ABI is the directory of the abi module, which the SDK requires,
	// beside SDK in a clone: a replace in the SDK's go.mod does not apply
	// to the plugin's module, so the plugin's replaces it too.
	ABI string
	// Weft is the weft command the Makefile runs.
	Weft string
}

func pluginNew(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weft plugin new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the `DIR`ectory to write, which must not exist or be empty (default ./NAME)")
	module := fs.String("module", "", "the Go module `PATH` (default example.com/NAME)")
	sdk := fs.String("sdk", "", "the `DIR`ectory of the SDK (a clone's sdk directory), which go.mod's replace points at (default: found beside this weft command or above the current directory)")
	const synopsis = "usage: weft plugin new NAME [-dir DIR] [-module PATH] [-sdk DIR]"
	if asksForHelp(args) {
		fmt.Fprintf(stdout, "%s\n\nWrites a Go plugin module: two activities, a test, a Makefile, a README and a workflow that calls them (NAME-demo.yaml).\n\nflags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	fs.Usage = func() { fmt.Fprintf(stderr, "%s (weft plugin new -h lists the flags)\n", synopsis) }
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	name := pos[0]
	if !abi.ValidName(name) {
		fmt.Fprintf(stderr, "weft: plugin new: invalid plugin name %q: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter\n", name, abi.MaxNameLen)
		return exitUsage
	}
	data := scaffoldData{Name: name, Module: *module, Weft: "weft"}
	if data.Module == "" {
		data.Module = "example.com/" + name
	}
	if *dir == "" {
		*dir = name
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "weft" {
		data.Weft = exe
	}
	if *sdk == "" {
		found, err := findSDK()
		if err != nil {
			fmt.Fprintf(stderr, "weft: plugin new: %v\n", err)
			return exitFailed
		}
		*sdk = found
	} else if err := isSDK(*sdk); err != nil {
		fmt.Fprintf(stderr, "weft: plugin new: -sdk %s: %v\n", *sdk, err)
		return exitUsage
	}
	if data.SDK, err = filepath.Abs(*sdk); err != nil {
		fmt.Fprintf(stderr, "weft: plugin new: -sdk: %v\n", err)
		return exitUsage
	}
	data.ABI = filepath.Join(filepath.Dir(data.SDK), "abi")
	written, err := writeScaffold(*dir, data)
	if err != nil {
		fmt.Fprintf(stderr, "weft: plugin new: %v\n", err)
		return exitFailed
	}
	for _, f := range written {
		fmt.Fprintln(stdout, filepath.Join(*dir, f))
	}
	fmt.Fprintf(stdout, "\nnext: cd %s && make test build check (its README.md says more)\n", *dir)
	return exitOK
}

// writeScaffold writes the templates into dir, which must not exist or be
// empty, and returns the names of the files written.
func writeScaffold(dir string, data scaffoldData) ([]string, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmpls, err := fs.Glob(scaffold, "scaffold/*.tmpl")
	if err != nil {
		return nil, err
	}
	var written []string
	for _, p := range tmpls {
		t, err := template.ParseFS(scaffold, p)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".tmpl")
		switch name {
		case "gitignore":
			name = ".gitignore"
		case "demo.yaml":
			name = data.Name + "-demo.yaml"
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		written = append(written, name)
	}
	return written, nil
}

// findSDK looks for the SDK's directory where a clone of the repository
// has it: above the weft command (bin/weft in the clone), then above the
// current directory.
func findSDK() (string, error) {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			if isSDK(filepath.Join(d, "sdk")) == nil {
				return filepath.Join(d, "sdk"), nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", fmt.Errorf("no SDK found beside this weft command or above the current directory: give -sdk DIR, the sdk directory of a clone of Weft's repository (no version of %s is published yet)", sdkModule)
}

// isSDK returns nil when dir holds the SDK's module.
func isSDK(dir string) error {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			if fields[1] != sdkModule {
				return fmt.Errorf("its go.mod is module %s, not %s", fields[1], sdkModule)
			}
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("its go.mod names no module")
}

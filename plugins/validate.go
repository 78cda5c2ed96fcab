package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/instrument"
	"github.com/weftworks/weft/plugins/grant"
)

func kindName(kind byte) string {
	switch kind {
	case instrument.KindTable:
		return "table"
	case instrument.KindGlobal:
		return "global"
	}
	return fmt.Sprintf("kind %d", kind)
}

// signature is a function type as "(i32,i32)->(i32)".
type signature string

func signatureOf(params, results []api.ValueType) signature {
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range params {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(api.ValueTypeName(p))
	}
	b.WriteString(")->(")
	for i, r := range results {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(api.ValueTypeName(r))
	}
	b.WriteByte(')')
	return signature(b.String())
}

// hostImports are the functions of the weft host module and their types.
var hostImports = map[string]signature{
	abi.ImportResult:              "(i32,i32)->()",
	abi.ImportLog:                 "(i32,i32,i32)->()",
	abi.ImportHeartbeat:           "(i32,i32)->(i32)",
	abi.ImportCancelled:           "()->(i32)",
	abi.ImportInfo:                "(i32,i32)->(i32)",
	abi.ImportLastHeartbeat:       "(i32,i32)->(i32)",
	abi.ImportConfig:              "(i32,i32,i32,i32)->(i32)",
	abi.ImportSecret:              "(i32,i32,i32,i32)->(i32)",
	abi.ImportHTTPRequest:         "(i32,i32,i32,i32,i32,i32,i32,i32)->(i32)",
	abi.ImportHTTPResponseHeaders: "(i32,i32)->(i32)",
	abi.ImportHTTPResponseBody:    "(i32,i32)->(i32)",
}

// requiredExports are the functions every plugin exports and their types.
var requiredExports = map[string]signature{
	abi.ExportABIVersion: "()->(i32)",
	abi.ExportAlloc:      "(i32)->(i32)",
	abi.ExportManifest:   "()->(i32)",
	abi.ExportInvoke:     "(i32,i32,i32)->(i32)",
}

// checkShape checks a module's imports (as the instrumentation read them
// from the module's bytes) and its compiled exports against the ABI, and
// returns every problem it finds, or nil.
func checkShape(cm wazero.CompiledModule, imports []instrument.Import) *ValidationError {
	var problems []string
	sigs := map[string]signature{}
	for _, f := range cm.ImportedFunctions() {
		module, name, _ := f.Import()
		if module == abi.HostModule {
			sigs[name] = signatureOf(f.ParamTypes(), f.ResultTypes())
		}
	}
	for _, imp := range imports {
		module, name := imp.Module, imp.Name
		switch {
		case imp.Kind == instrument.KindMemory:
			problems = append(problems, fmt.Sprintf("import %s.%s: importing a memory is not allowed; export one named %q", module, name, abi.ExportMemory))
		case imp.Kind != instrument.KindFunc:
			problems = append(problems, fmt.Sprintf("import %s.%s: importing a %s is not allowed; plugins import only functions", module, name, kindName(imp.Kind)))
		case module == abi.HostModule:
			want, ok := hostImports[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("import %s.%s: the host module has no such function", module, name))
			case sigs[name] != want:
				problems = append(problems, fmt.Sprintf("import %s.%s: type %s, want %s", module, name, sigs[name], want))
			}
		case module == abi.WASIModule:
			if _, ok := abi.AllowedWASI(name); !ok && !abi.InertWASI(name) {
				problems = append(problems, fmt.Sprintf("import %s.%s: not a WASI preview 1 function the host provides (abi/README.md §5)", module, name))
			}
		default:
			problems = append(problems, fmt.Sprintf("import %s.%s: module %q is not allowed; plugins import only from %q and %q", module, name, module, abi.HostModule, abi.WASIModule))
		}
	}

	exports := cm.ExportedFunctions()
	names := make([]string, 0, len(requiredExports))
	for name := range requiredExports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, ok := exports[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("export %s: missing", name))
			continue
		}
		if sig := signatureOf(f.ParamTypes(), f.ResultTypes()); sig != requiredExports[name] {
			problems = append(problems, fmt.Sprintf("export %s: type %s, want %s", name, sig, requiredExports[name]))
		}
	}
	if _, ok := exports[abi.ExportStart]; ok {
		problems = append(problems, fmt.Sprintf("export %s: the module is a WASI command; build a reactor (Go: -buildmode=c-shared; clang: -mexec-model=reactor)", abi.ExportStart))
	}
	if f, ok := exports[abi.ExportInitialize]; ok {
		if sig := signatureOf(f.ParamTypes(), f.ResultTypes()); sig != "()->()" {
			problems = append(problems, fmt.Sprintf("export %s: type %s, want ()->()", abi.ExportInitialize, sig))
		}
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		problems = append(problems, fmt.Sprintf("export %s: missing (the module must export its linear memory)", abi.ExportMemory))
	}
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: problems}
}

// describe asks a fresh instance for its ABI version and manifest and checks
// both.
func (in *instance) describe(ctx context.Context, version string, size int) (*Module, error) {
	in.stack[0] = 0
	in.resetStack()
	vcs := &callState{rt: in.pool.rt, export: abi.ExportABIVersion}
	err := in.abiVersion.CallWithStack(in.begin(ctx, vcs), in.stack[:])
	in.end()
	vcs.flushLogs()
	if err != nil {
		return nil, callFailed(ctx, abi.ExportABIVersion, err)
	}
	if v := uint32(in.stack[0]); v != abi.Version {
		return nil, invalid("ABI version %d: this host implements version %d", v, abi.Version)
	}

	cs := &callState{rt: in.pool.rt, export: abi.ExportManifest}
	in.resetStack()
	err = in.manifest.CallWithStack(in.begin(ctx, cs), in.stack[:])
	in.end()
	cs.flushLogs()
	switch {
	case err != nil:
		return nil, callFailed(ctx, abi.ExportManifest, err)
	case cs.violation != nil:
		return nil, invalid("calling %s: %v", abi.ExportManifest, cs.violation)
	case uint32(in.stack[0]) != abi.StatusOK:
		return nil, invalid("%s returned status %d, want %d", abi.ExportManifest, uint32(in.stack[0]), abi.StatusOK)
	}
	manifest, verr := parseManifest(cs.result)
	if verr != nil {
		return nil, verr
	}
	return &Module{Version: version, Size: size, Activities: manifest.Activities, Needs: manifest.Needs}, nil
}

// callFailed describes a failed call of export while a version loads: the
// reason the host stopped it, or the trap.
func callFailed(ctx context.Context, export string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if serr := stopped(err); serr != nil {
		return invalid("calling %s: %v", export, serr)
	}
	return invalid("calling %s: %v", export, err)
}

// parseManifest decodes and checks a manifest document.
func parseManifest(doc []byte) (*abi.Manifest, *ValidationError) {
	var m abi.Manifest
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, invalid("manifest: not the JSON document of abi/README.md §6: %v", err)
	}
	// Decode stops after the first document; the manifest is one document,
	// and bytes after it (a C guest passing its buffer's size, NULs
	// included) are a bug the author should hear about.
	if rest := bytes.TrimLeft(doc[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, invalid("manifest: %d bytes after the JSON document of abi/README.md §6, at offset %d: %s", len(rest), len(doc)-len(rest), excerpt(rest))
	}
	var problems []string
	if len(m.Activities) == 0 {
		problems = append(problems, "manifest: lists no activities")
	}
	seen := map[string]bool{}
	for i, a := range m.Activities {
		switch {
		case !abi.ValidName(a.Name):
			problems = append(problems, fmt.Sprintf("manifest: activities[%d].name %q: want 1-%d of [a-z0-9_-] starting with a letter", i, a.Name, abi.MaxNameLen))
		case seen[a.Name]:
			problems = append(problems, fmt.Sprintf("manifest: activities[%d].name %q: listed twice", i, a.Name))
		}
		seen[a.Name] = true
	}
	problems = append(problems, grant.CheckNeeds(m.Needs)...)
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return &m, nil
}

// Package abi is the contract between the Weft host and an activity plugin:
// the names of the exports a plugin provides and of the host functions it may
// import, the status codes, the shape of the JSON documents that cross the
// boundary, and the ABI version.
//
// README.md beside this file is the normative specification; this package only
// gives its names to Go code. It has no dependencies beyond the standard
// library so that the SDK can import it when built with TinyGo.
package abi

// Version is the ABI version this package describes. A plugin's
// weft_abi_version export must return it.
const Version = 1

// HostModule is the import module name of the host functions.
const HostModule = "weft"

// WASIModule is the import module name of the WASI preview 1 functions.
const WASIModule = "wasi_snapshot_preview1"

// Exports a plugin must (or, for ExportInitialize, may) provide.
const (
	ExportMemory     = "memory"
	ExportABIVersion = "weft_abi_version" // () -> i32
	ExportAlloc      = "weft_alloc"       // (size i32) -> ptr i32
	ExportManifest   = "weft_manifest"    // () -> status i32
	ExportInvoke     = "weft_invoke"      // (ptr, activity_len, input_len i32) -> status i32
	// ExportInitialize is the WASI reactor initialiser. When present the host
	// calls it once, right after instantiation.
	ExportInitialize = "_initialize"
	// ExportStart marks a WASI command module, which runs main and exits.
	// Plugins must be reactors, so a module exporting it is refused.
	ExportStart = "_start"
)

// Host functions in HostModule.
const (
	ImportResult        = "result"         // (ptr, len i32)
	ImportLog           = "log"            // (level, ptr, len i32)
	ImportHeartbeat     = "heartbeat"      // (ptr, len i32) -> cancelled i32
	ImportCancelled     = "cancelled"      // () -> cancelled i32
	ImportInfo          = "info"           // (buf, cap i32) -> len i32
	ImportLastHeartbeat = "last_heartbeat" // (buf, cap i32) -> len i32, -1 when none
	ImportConfig        = "config"         // (key, key_len, buf, cap i32) -> len i32, -1 when unset
	ImportSecret        = "secret"         // (name, name_len, buf, cap i32) -> len i32
	// ImportHTTPRequest sends an HTTP request and waits for its response:
	// (method, method_len, url, url_len, headers, headers_len, body,
	// body_len i32) -> status i32 (100–599), or a negative HTTPError.
	ImportHTTPRequest = "http_request"
	// ImportHTTPResponseHeaders reads the header lines of the last response
	// of the call: (buf, cap i32) -> len i32, -1 when there is none.
	ImportHTTPResponseHeaders = "http_response_headers"
	// ImportHTTPResponseBody reads the body of the last response of the
	// call: (buf, cap i32) -> len i32, -1 when there is none.
	ImportHTTPResponseBody = "http_response_body"
)

// HTTPError is what http_request returns, instead of a status, when no
// response arrived. The host logs the reason to the activity's log and
// records it with the request.
type HTTPError = int32

// Reasons an HTTP request got no response.
const (
	// HTTPTimeout: the request's own timeout (plugins.http.timeout or
	// plugins.http.connect_timeout) passed. The attempt's deadline does not
	// return this: it stops the guest.
	HTTPTimeout HTTPError = -1
	// HTTPUnreachable: the name did not resolve, or the connection was
	// refused or reset.
	HTTPUnreachable HTTPError = -2
	// HTTPTLS: the TLS handshake failed (an untrusted or mismatched
	// certificate).
	HTTPTLS HTTPError = -3
	// HTTPBadResponse: the server's answer was not valid HTTP, or it
	// redirected more than 10 times.
	HTTPBadResponse HTTPError = -4
)

// Status is what weft_invoke and weft_manifest return.
type Status = uint32

// Statuses returned by the guest's exports. Any other value is an ABI
// violation.
const (
	// StatusOK: the result is the activity's output (or the manifest).
	StatusOK Status = 0
	// StatusError: the result is a Failure document; the instance is healthy.
	StatusError Status = 1
	// StatusPanic: the result is a Failure document and the guest may be
	// corrupt; the host discards the instance.
	StatusPanic Status = 2
)

// NotFound is what last_heartbeat and config return when there is nothing to
// return. As a length it is -1; as the raw i32 it is 0xFFFFFFFF.
const NotFound int32 = -1

// Log levels passed to the log host function.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// Failure codes with a meaning to the host. Plugins may use any other code.
const (
	// CodeCancelled: the activity stopped because cancellation was requested.
	CodeCancelled = "cancelled"
	// CodeUnknownActivity: weft_invoke was called with a name not in the manifest.
	CodeUnknownActivity = "unknown_activity"
	// CodeBadInput: the input could not be decoded.
	CodeBadInput = "bad_input"
	// CodePanic: the activity panicked.
	CodePanic = "panic"
	// CodeNotGranted: the activity asked for an HTTP host or a secret that
	// is not granted to its plugin. The host sets it; it is not retried.
	CodeNotGranted = "not_granted"
)

// Failure is the document a guest passes to result with StatusError or
// StatusPanic.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	// Retryable lets the step's retry policy try again; false when the
	// document leaves it out.
	Retryable bool `json:"retryable"`
	// Details is any JSON value, or empty.
	Details []byte `json:"-"`
}

// Manifest is the document weft_manifest passes to result.
type Manifest struct {
	Activities []Activity `json:"activities"`
	// Needs declares what the plugin asks an operator to grant. It grants
	// nothing by itself.
	Needs *Needs `json:"needs,omitempty"`
}

// Needs is what a plugin declares it needs from the operator: the hosts its
// HTTP requests reach, the configuration keys and the secrets it reads.
type Needs struct {
	// Hosts are patterns in the form of a host grant:
	// [scheme://]host[:port], host a name, *.suffix, or an IP literal.
	Hosts []string `json:"hosts,omitempty"`
	// Config lists configuration keys.
	Config []string `json:"config,omitempty"`
	// Secrets lists secret names.
	Secrets []string `json:"secrets,omitempty"`
}

// Activity describes one activity in a Manifest.
type Activity struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Info is the document the info host function writes.
type Info struct {
	InstanceID string `json:"instance_id"`
	Workflow   string `json:"workflow"`
	StepID     string `json:"step_id"`
	Plugin     string `json:"plugin"`
	Activity   string `json:"activity"`
	Attempt    int    `json:"attempt"`
	// IdempotencyKey is the same for every attempt of one step execution.
	// It is opaque: compared, stored or passed on, never parsed.
	IdempotencyKey string `json:"idempotency_key"`
	// DeadlineUnixMilli is when the host stops the attempt; 0 when nothing
	// bounds it in time (never under weft serve).
	DeadlineUnixMilli int64 `json:"deadline_unix_ms"`
	// TraceID and SpanID are the W3C trace context of the attempt's span
	// (32 and 16 lowercase hex digits) when the host traces it, so that a
	// plugin's own logs and outbound calls can carry them; empty
	// otherwise.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// MaxNameLen is the longest plugin or activity name.
const MaxNameLen = 64

// ValidName reports whether s is a valid plugin or activity name: 1 to
// MaxNameLen characters from [a-z0-9_-], starting with a letter. Names never
// contain '.', which separates plugin and activity in a workflow definition.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// InertWASI reports whether name is a WASI preview 1 function that a plugin
// may import but that always fails: the host links it to its own stub that
// returns EBADF (errno 8) and does nothing else.
//
// They are accepted because stock Go links them into ordinary plugins: any
// program that calls methods through reflection by name (text/template and
// html/template do) keeps every exported method of *os.File, and with them
// the imports of path_open, fd_pread, sock_accept and the rest. Refusing
// those modules would refuse most realistic Go plugins; linking them to
// stubs, rather than to a WASI implementation with nothing configured,
// leaves no configuration that could ever give a plugin a file or a socket.
func InertWASI(name string) bool {
	switch name {
	case "fd_advise", "fd_allocate", "fd_datasync", "fd_fdstat_set_rights",
		"fd_filestat_get", "fd_filestat_set_size", "fd_filestat_set_times",
		"fd_pread", "fd_pwrite", "fd_readdir", "fd_renumber", "fd_sync", "fd_tell",
		"path_create_directory", "path_filestat_get", "path_filestat_set_times",
		"path_link", "path_open", "path_readlink", "path_remove_directory",
		"path_rename", "path_symlink", "path_unlink_file",
		"proc_raise", "sock_accept", "sock_recv", "sock_send", "sock_shutdown":
		return true
	}
	return false
}

// AllowedWASI reports whether a plugin may import the WASI preview 1
// function name, and why that is harmless. The host gives a plugin no
// preopened directories, no arguments, no environment and no sockets, so the
// file-descriptor functions allowed here only ever see stdin (empty), stdout
// and stderr (captured into the activity's log). Stock Go and wasi-libc import
// several of them during start-up whether or not the plugin uses files.
func AllowedWASI(name string) (why string, ok bool) {
	switch name {
	case "args_get":
		return "always empty", true
	case "args_sizes_get":
		return "always empty", true
	case "environ_get":
		return "always empty", true
	case "environ_sizes_get":
		return "always empty", true
	case "clock_time_get":
		return "real wall and monotonic clocks", true
	case "clock_res_get":
		return "real wall and monotonic clocks", true
	case "random_get":
		return "cryptographic random source", true
	case "poll_oneoff":
		return "sleeping; only stdio descriptors exist", true
	case "sched_yield":
		return "no-op", true
	case "proc_exit":
		return "ends the call; the instance is discarded", true
	case "fd_write":
		return "stdout and stderr, captured into the activity's log", true
	case "fd_read":
		return "stdin, always at end of file", true
	case "fd_close":
		return "stdio only", true
	case "fd_seek":
		return "stdio only (not seekable)", true
	case "fd_fdstat_get":
		return "stdio only", true
	case "fd_fdstat_set_flags":
		return "stdio only", true
	case "fd_prestat_get":
		return "no preopened directories exist", true
	case "fd_prestat_dir_name":
		return "no preopened directories exist", true
	}
	return "", false
}

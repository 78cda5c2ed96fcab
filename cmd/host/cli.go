package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// Exit codes that scripts can test. README.md documents them.
const (
	exitOK       = 0
	exitFailed   = 1 // the run failed or was cancelled; the request or plugin was refused; the host cannot start
	exitUsage    = 2 // bad command line
	exitInternal = 3 // the server could not be reached or failed (5xx)
	exitNotFound = 4 // no such plugin, workflow or instance
	exitAuth     = 5 // no token, a wrong token, or a role that may not
	exitPending  = 6 // --wait with a duration ended before the instance did
)

// app is one invocation of the weft command with its environment, so
// that tests run it in-process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// env is the environment, as os.Environ returns it.
	env []string
	// terminal reports whether stderr is a terminal (the --wait spinner
	// and a batch's progress bar are drawn only then).
	terminal bool
	// interactive reports whether stdin and stderr are a terminal, with
	// someone to answer a question (weft batch start's confirmation).
	interactive bool
	// now is the clock of the spinner and of the limit of --wait=DURATION.
	now func() time.Time
}

func (a *app) getenv(name string) string {
	for i := len(a.env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(a.env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

func (a *app) errorf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "weft: "+format+"\n", args...)
}

// clientCmd is what every client subcommand shares: its flags, the
// client, and how it writes results.
type clientCmd struct {
	*app
	name   string
	fs     *flag.FlagSet
	server string
	token  string
	output string
	c      *client.Client
	// help is set when the command line asked for help (-h, --help),
	// which parse printed.
	help bool
}

// newClientCmd returns a subcommand with --server, --token and -o.
func (a *app) newClientCmd(name string) *clientCmd {
	cmd := &clientCmd{app: a, name: name, fs: flag.NewFlagSet("weft "+name, flag.ContinueOnError)}
	cmd.fs.SetOutput(a.stderr)
	server := a.getenv("WEFT_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	output := a.getenv("WEFT_OUTPUT")
	if output == "" {
		output = "table"
	}
	cmd.fs.StringVar(&cmd.server, "server", server, "the host's `URL` ($WEFT_SERVER)")
	cmd.fs.StringVar(&cmd.token, "token", a.getenv("WEFT_TOKEN"), "the bearer `TOKEN` ($WEFT_TOKEN)")
	cmd.fs.StringVar(&cmd.output, "o", output, "output: table or json ($WEFT_OUTPUT)")
	cmd.fs.StringVar(&cmd.output, "output", output, "output: table or json")
	return cmd
}

// parse parses args, flags and positional arguments in any order, checks
// that there are between min and max positional arguments (max < 0: no
// limit), and makes the client. It returns the positional arguments, or
// ok=false after printing what was wrong.
func (cmd *clientCmd) parse(args []string, min, max int, what string) (pos []string, ok bool) {
	cmd.fs.Usage = func() {
		// On stdout when asked for, on stderr after a bad flag.
		w := cmd.stderr
		if cmd.help {
			w = cmd.stdout
		}
		fmt.Fprintf(w, "usage: weft %s %s\n\nflags:\n", cmd.name, what)
		cmd.fs.SetOutput(w)
		cmd.fs.PrintDefaults()
		cmd.fs.SetOutput(cmd.stderr)
	}
	cmd.help = asksForHelp(args)
	if cmd.help {
		cmd.fs.Usage()
		return nil, false
	}
	pos, err := parseInterleaved(cmd.fs, args)
	if err != nil {
		return nil, false
	}
	switch {
	case len(pos) < min:
		cmd.errorf("%s: missing %s\nusage: weft %s %s", cmd.name, what, cmd.name, what)
		return nil, false
	case max >= 0 && len(pos) > max:
		cmd.errorf("%s: unexpected argument %q\nusage: weft %s %s", cmd.name, pos[max], cmd.name, what)
		return nil, false
	}
	if cmd.output != "table" && cmd.output != "json" {
		cmd.errorf("%s: -o must be table or json, got %q", cmd.name, cmd.output)
		return nil, false
	}
	c, err := client.New(client.Config{Server: cmd.server, Token: cmd.token, UserAgent: "weft-cli"})
	if err != nil {
		cmd.errorf("--server: %v", err)
		return nil, false
	}
	cmd.c = c
	return pos, true
}

// usageExit is a command's exit code when parse returned ok=false: 0 after
// the help it was asked for, 2 after a bad command line.
func (cmd *clientCmd) usageExit() int {
	if cmd.help {
		return exitOK
	}
	return exitUsage
}

// asksForHelp reports whether args hold -h, -help or --help before a "--".
func asksForHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// parseInterleaved parses flags that may come after positional arguments
// (weft run hello --wait), which the flag package alone stops at.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at "--" too; what follows it is positional.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// json writes v as indented JSON. encoding/json escapes the C0 controls
// in strings but writes the C1 ones (U+0080 to U+009F, which some
// terminals act on as ESC sequences) and the bidirectional overrides as
// they are: they are escaped too, which leaves the same JSON.
func (cmd *clientCmd) json(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		cmd.errorf("encoding the answer: %v", err)
		return
	}
	cmd.stdout.Write(append(escapeJSON(b), '\n'))
}

// escapeJSON returns JSON with the unprintable characters it holds raw
// (only in strings: encoding/json escapes the others) written as \u
// escapes.
func escapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, unprintable) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if unprintable(r) && r >= 0x80 {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[:n])
		}
		b = b[n:]
	}
	return out.Bytes()
}

// printable returns s as it may be written to a terminal: the control
// characters a plugin's message or a client's key may hold (ESC, BEL, CR,
// backspace: a terminal acts on them, to set its title, the clipboard or
// overwrite a line), the C1 controls, the bidirectional overrides that
// reorder what is shown, and bytes that are not UTF-8 are written as Go
// escapes (\x1b, \r, \u009b, \u202e), as %q would; newlines and tabs are
// kept when layout is true, for text printed on lines of its own.
func printable(s string, layout bool) string {
	if !strings.ContainsFunc(s, unprintable) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case layout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unprintable(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unprintable reports whether a terminal would act on r rather than show
// it, or show it out of order.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// table returns a tabwriter on stdout; flush it when done.
func (cmd *clientCmd) table() *tabwriter.Writer {
	return tabwriter.NewWriter(cmd.stdout, 0, 4, 2, ' ', 0)
}

// fail prints err readably and returns its exit code.
func (cmd *clientCmd) fail(err error) int {
	var (
		p  *client.Error
		te *client.TransportError
	)
	switch {
	case errors.As(err, &p):
		var b strings.Builder
		fmt.Fprintf(&b, "weft: %s", p.Title)
		if p.Detail != "" {
			fmt.Fprintf(&b, ": %s", p.Detail)
		}
		b.WriteString("\n")
		for _, e := range p.Errors {
			if len(p.Errors) == 1 && p.Detail == e.Path+": "+e.Message {
				break // the detail said it already
			}
			fmt.Fprintf(&b, "  %s\n", e)
		}
		if len(p.Instances) > 0 {
			fmt.Fprintf(&b, "  instances: %s\n", strings.Join(p.Instances, ", "))
		}
		switch p.Status {
		case http.StatusUnauthorized:
			b.WriteString("  (pass a token with --token or WEFT_TOKEN)\n")
		case http.StatusForbidden:
			b.WriteString("  (this token's role may not do this; see auth.tokens in README.md)\n")
		}
		if p.RequestID != "" && p.Status >= 500 {
			fmt.Fprintf(&b, "  (request id %s: the host's log has the cause)\n", p.RequestID)
		}
		io.WriteString(cmd.stderr, b.String())
		return problemExit(p.Status)
	case errors.As(err, &te):
		cmd.errorf("cannot reach the host at %s: %v\n  (is it running? start it with `weft serve` or `make run`, or point --server or WEFT_SERVER at it)", cmd.server, te.Err)
		return exitInternal
	case errors.Is(err, context.Canceled):
		cmd.errorf("interrupted")
		return exitInterrupted
	}
	cmd.errorf("%v", err)
	return exitInternal
}

func problemExit(status int) int {
	switch {
	case status == http.StatusNotFound:
		return exitNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return exitAuth
	case status >= 500:
		return exitInternal
	}
	return exitFailed
}

// readArg reads a JSON argument: inline JSON, @FILE, or @- for stdin. It
// checks that the result is valid JSON and names the flag when it is not.
func (a *app) readJSONArg(flagName, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	data := []byte(v)
	src := "the value"
	if rest, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if rest == "-" {
			data, err = io.ReadAll(a.stdin)
			src = "stdin"
		} else {
			data, err = os.ReadFile(rest)
			src = rest
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
	}
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		var x any
		err := json.Unmarshal(data, &x)
		return nil, fmt.Errorf("%s: %s is not valid JSON: %v", flagName, src, err)
	}
	return data, nil
}

// formatTime formats t for tables: local time to the second.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// compactJSON returns raw on one line, cut to max runes ("" stays "-").
func compactJSON(raw json.RawMessage, max int) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if r := []rune(s); max > 0 && len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// indentJSON returns raw indented, each line after the first prefixed.
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// printPage prints a page for scripts (-o json) or for people: a table
// with header and one row per item, then how to get the next page.
func printPage[T any](cmd *clientCmd, page *apiv1.Page[T], header string, row func(T) string) int {
	if cmd.output == "json" {
		cmd.json(page)
		return exitOK
	}
	tw := cmd.table()
	fmt.Fprintln(tw, header)
	for _, it := range page.Items {
		// What the items hold (an event's key, its payload) is escaped
		// where a terminal would act on it, cell by cell.
		cells := strings.Split(row(it), "\t")
		for i, c := range cells {
			cells[i] = printable(c, false)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	cmd.nextPage(page.NextCursor)
	return exitOK
}

// nextPage tells how to get the next page, on stderr so that stdout stays
// the table.
func (cmd *clientCmd) nextPage(next string) {
	if next != "" && cmd.output == "table" {
		fmt.Fprintf(cmd.stderr, "(more: add --cursor %s)\n", next)
	}
}

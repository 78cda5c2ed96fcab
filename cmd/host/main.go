// Command weft is the Weft host and its command-line client.
//
//	weft serve [--config FILE] [--listen ADDR] [--data-dir DIR] [--seed DIR]...
//	weft config [same flags as serve]
//
// The client commands talk to a host over its HTTP API (--server, --token,
// or WEFT_SERVER, WEFT_TOKEN):
//
//	weft plugin push|ls|show|rm
//	weft plugin grant NAME [--host PATTERN]... [--private-networks] [--config KEY=VALUE]... [--secret NAME=REF]...
//	    [--rate N/PERIOD [--burst N] [--max-wait D] [--rate-key KEY]] [-f FILE.json|-]
//	weft plugin revoke NAME [--host PATTERN]... [--config KEY]... [--secret NAME]... [--all]
//	weft plugin shadow NAME FILE.wasm [--last N] [--workflow W] [--since T]
//	weft workflow put|ls|show|rm
//	weft workflow pause NAME [--reason R] | resume NAME [--reason R] [--rate N] [--watch]
//	weft run WORKFLOW [--input JSON|@FILE] [--id ID] [--priority N] [--wait[=DURATION]] [--until finished|suspended]
//	weft instance ls|count|show|history|logs|cancel|retry|pause|resume|reset|reset-points|migrate|rm|export|import
//	weft batch start OP (--query Q | --ids FILE|-) [flags]
//	weft batch ls|show|items|confirm|cancel
//	weft search-attributes
//	weft event send NAME [--key KEY] [--payload JSON|@FILE] [--id ID] [--priority N]
//	weft event ls|dead
//	weft schedule create|update FILE|-
//	weft schedule ls|show|pause|unpause|trigger|backfill|rm
//	weft flow ls [--workflow W] | show WORKFLOW [KEY] | show --step KEY | rates [--kind step|host] [--prefix P]
//	weft admin status
//	weft admin refresh [WORKFLOW...]
//	weft admin backup FILE|-
//	weft attempt ls INSTANCE_ID
//	weft attempt replay INSTANCE_ID --step STEP --attempt N [--exec E] [--plugin FILE.wasm]
//	weft attempt export INSTANCE_ID --step STEP --attempt N [--exec E] [--module FILE.wasm] --file FILE|-
//
// and three local commands, without a server, write a plugin and run one
// in the host's sandbox:
//
//	weft plugin new NAME [-dir DIR] [-module PATH] [-sdk DIR]
//	weft plugin check FILE.wasm
//	weft plugin call FILE.wasm ACTIVITY [-input JSON|@FILE] [-attempt N] [-timeout D]
//	    [-config k=v]... [-secret NAME=REF]... [-host PATTERN]... [-private-networks]
//	    [-rate N/PERIOD [-burst N] [-max-wait D] [-rate-key KEY]]
//	    [-last-heartbeat JSON] [-cancel-at-heartbeat N] [-o text|json]
//	weft plugin call --replay BUNDLE [--plugin FILE.wasm] [-timeout D] [-o text|json]
//
// Exit codes: 0 ok; 1 failed (the run failed or was cancelled, the request
// or the plugin was refused, the host cannot start); 2 usage; 3 server or
// transport error; 4 not found; 5 unauthorized or forbidden; 6 a --wait
// with a duration ended before the instance did; 130 interrupted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		// serve handles its own signals: the first shuts down gracefully,
		// the second exits at once.
		os.Exit(serveCmd(os.Args[2:], os.Environ(), os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, env: os.Environ(), terminal: isTerminal(os.Stderr),
		interactive: isTerminal(os.Stdin) && isTerminal(os.Stderr), now: time.Now}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// commands maps "group verb" (or a single word) to its implementation.
func (a *app) commands() map[string]func(context.Context, []string) int {
	return map[string]func(context.Context, []string) int{
		"plugin check":     func(ctx context.Context, args []string) int { return pluginCheck(ctx, args, a.stdout, a.stderr) },
		"plugin call":      func(ctx context.Context, args []string) int { return pluginCall(ctx, args, a.stdout, a.stderr) },
		"plugin new":       func(_ context.Context, args []string) int { return pluginNew(args, a.stdout, a.stderr) },
		"plugin push":      a.pluginPush,
		"plugin ls":        a.pluginList,
		"plugin show":      a.pluginShow,
		"plugin rm":        a.pluginRemove,
		"plugin grant":     a.pluginGrant,
		"plugin revoke":    a.pluginRevoke,
		"plugin shadow":    a.pluginShadow,
		"workflow put":     a.workflowPut,
		"workflow ls":      a.workflowList,
		"workflow show":    a.workflowShow,
		"workflow rm":      a.workflowRemove,
		"workflow pause":   a.workflowPause,
		"workflow resume":  a.workflowResume,
		"run":              a.runCmd,
		"instance ls":      a.instanceList,
		"instance show":    a.instanceShow,
		"instance history": a.instanceHistory,
		"instance logs":    a.instanceLogs,
		"instance cancel":  a.instanceCancel,
		"instance retry":   a.instanceRetry,
		"instance pause":   a.instancePause,
		"instance resume":  a.instanceResume,
		"instance reset":   a.instanceReset,
		"instance migrate": a.instanceMigrate,
		"instance count":   a.instanceCount,
		"instance rm":      a.instanceRemove,
		"instance export":  a.instanceExport,
		"instance import":  a.instanceImport,
		"event send":       a.eventSend,
		"event ls":         a.eventList,
		"event dead":       a.eventDead,
		"admin status":     a.adminStatus,
		"admin refresh":    a.adminRefresh,
		"admin backup":     a.adminBackup,

		// Schedules (docs/schedules.md).
		"schedule create":   a.scheduleCreate,
		"schedule update":   a.scheduleUpdate,
		"schedule ls":       a.scheduleList,
		"schedule show":     a.scheduleShow,
		"schedule pause":    a.schedulePause,
		"schedule unpause":  a.scheduleUnpause,
		"schedule trigger":  a.scheduleTrigger,
		"schedule backfill": a.scheduleBackfill,
		"schedule rm":       a.scheduleRemove,

		// Concurrency and rate limit keys (docs/flow-control.md).
		"flow ls":    a.flowList,
		"flow show":  a.flowShow,
		"flow rates": a.flowRates,

		// Search attributes (docs/operations.md#search).
		"search-attributes": a.searchAttributes,

		// Reset points and batch jobs (docs/operations.md#reset,
		// #batch-operations).
		"instance reset-points": a.instanceResetPoints,
		"batch start":           a.batchStart,
		"batch ls":              a.batchList,
		"batch show":            a.batchShow,
		"batch items":           a.batchItems,
		"batch confirm":         a.batchConfirm,
		"batch cancel":          a.batchCancel,

		// Recorded attempts (docs/http-api.md#tapes).
		"attempt ls":     a.attemptList,
		"attempt replay": a.attemptReplay,
		"attempt export": a.attemptExport,
	}
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(a.stderr)
		return exitUsage
	}
	if args[0] == "help" && len(args) == 2 && isGroup(args[1]) {
		groupUsage(a.stdout, args[1])
		return exitOK
	}
	switch args[0] {
	case "help", "-h", "--help":
		usage(a.stdout)
		return exitOK
	case "config":
		return configCmd(args[1:], a.env, a.stdout, a.stderr)
	case "serve":
		return serveCmd(args[1:], a.env, a.stderr)
	}
	args = moveGlobalFlags(args)
	cmds := a.commands()
	if f, ok := cmds[args[0]]; ok {
		return f(ctx, args[1:])
	}
	if len(args) >= 2 {
		if f, ok := cmds[args[0]+" "+args[1]]; ok {
			return f(ctx, args[2:])
		}
	}
	if isGroup(args[0]) {
		// weft instance -h, --help or help: the group's commands.
		if len(args) >= 2 && (args[1] == "help" || asksForHelp(args[1:2])) {
			groupUsage(a.stdout, args[0])
			return exitOK
		}
		if len(args) == 1 || strings.HasPrefix(args[1], "-") {
			fmt.Fprintf(a.stderr, "weft: %s: missing a command\n\n", args[0])
		} else {
			fmt.Fprintf(a.stderr, "weft: unknown command %q\n\n", args[0]+" "+args[1])
		}
		groupUsage(a.stderr, args[0])
		return exitUsage
	}
	fmt.Fprintf(a.stderr, "weft: unknown command %q\n\n", args[0])
	usage(a.stderr)
	return exitUsage
}

// isGroup reports whether name is a group of commands (weft instance ...).
func isGroup(name string) bool {
	switch name {
	case "plugin", "workflow", "instance", "event", "schedule", "flow", "batch", "admin", "attempt":
		return true
	}
	return false
}

// groupUsage writes the lines of the usage that are of group's commands,
// with the lines that go on under them.
func groupUsage(w io.Writer, group string) {
	fmt.Fprintf(w, "usage: weft %s COMMAND [ARGS] [FLAGS]\n\n", group)
	in := false
	for _, line := range strings.Split(usageText, "\n") {
		switch {
		case strings.HasPrefix(line, "  weft "+group+" "):
			in = true
		case strings.HasPrefix(line, "   ") && !strings.HasPrefix(strings.TrimSpace(line), "weft "):
			// A line that goes on under the one before.
		default:
			in = false
		}
		if in {
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, `
The client's commands take --server URL, --token TOKEN and -o table|json (or WEFT_SERVER,
WEFT_TOKEN, WEFT_OUTPUT). weft %s COMMAND -h prints a command's flags; weft -h, every command.
`, group)
}

// moveGlobalFlags moves the client flags given before the command
// (weft --server URL plugin ls) after it, where the command parses them.
func moveGlobalFlags(args []string) []string {
	var global []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "server", "token", "o", "output":
		default:
			return append(args, global...) // the command will refuse it
		}
		n := 2
		if hasValue || len(args) == 1 {
			n = 1
		}
		global, args = append(global, args[:n]...), args[n:]
	}
	if len(args) == 0 {
		return global
	}
	return append(args, global...)
}

func usage(w io.Writer) { fmt.Fprint(w, usageText) }

// usageText is weft -h; groupUsage prints its lines of one group.
const usageText = `usage: weft COMMAND [ARGS] [FLAGS]

The host:
  weft serve [flags]              start the host (flags: weft serve -h)
  weft config [flags]             print the effective configuration, secrets masked

The client (flags of every client command: --server URL, --token TOKEN, -o table|json;
or WEFT_SERVER, WEFT_TOKEN, WEFT_OUTPUT):
  weft plugin push FILE.wasm [--name NAME]
  weft plugin ls | show NAME | rm NAME [--force]
  weft plugin grant NAME [--host PATTERN]... [--private-networks] [--config KEY=VALUE]...
                         [--secret NAME=REF]... [--rate N/PERIOD [--burst N] [--max-wait D]
                         [--rate-key KEY]] | NAME -f FILE.json|-
      add to what the plugin may reach and read (REF: env:VARIABLE or file:/path);
      --rate limits the requests under the command's --host rules (10/1s), --burst how many
      go at once, --max-wait how long one waits for its turn before the plugin gets a 429,
      --rate-key the budget they share (default: each rule's pattern);
      -f replaces everything granted with the file's grant document
  weft plugin revoke NAME [--host PATTERN]... [--config KEY]... [--secret NAME]... | NAME --all
  weft plugin shadow NAME FILE.wasm [--last N] [--workflow W] [--since T]
      replay the plugin's recorded attempts (the newest N, default 100) against a candidate
      module, next to the versions that recorded them, without uploading it
      (docs/replay.md#shadow-runs); T: RFC 3339 or a duration ago (24h); prints each attempt's
      outcome, speed and diff, and a summary; exit 0 when every attempt is the same, 1 otherwise;
      admin
  weft workflow put FILE.yaml...
  weft workflow ls | show NAME [--version N] | rm NAME
  weft workflow pause NAME [--reason R] | resume NAME [--reason R] [--rate N] [--watch]
      pause: its new starts (API, triggers, schedules, child steps) are held, pending, until
      resume releases them, oldest first, through a batch at --rate a second (default 1000;
      0: no limit), which --watch follows (docs/operations.md#pause-a-workflow)
  weft run WORKFLOW [--input JSON|@FILE|@-] [--id ID] [--priority N] [--wait[=DURATION]]
           [--until finished|suspended]
      --priority: 1 (served first) to 5 (served last), before the definition's (3 unless it says);
      --until suspended: the wait ends when the instance suspends (waits for an event, a
      delay or a retry's backoff) or is paused, as well as when it ends; --until implies --wait
  weft instance ls [--workflow W] [--status S] [--after T] [--before T] [--oldest]
                   [--id ID | --event E --key K | --key K | --query Q] [--plugin P [--plugin-version V]]
                   [--limit N] [--cursor C]
      T: RFC 3339 (2026-11-25T10:00:00Z) or a duration ago (90m); the newest first;
      Q: a query of the search attributes and built-in fields (docs/operations.md#search),
      such as 'customer = "acme" AND amount > 1000'
  weft instance count [--workflow W]   the instances by status
  weft instance show ID [--wait[=DURATION]] [--until finished|suspended]
      with --wait, once the instance has ended (or suspended), exiting as weft run --wait does
  weft instance history ID
  weft instance logs ID [--step ID|PATH] [--attempt N]
                                  its activity attempts' log lines, oldest first
  weft instance cancel ID... [--reason R] | rm ID
  weft instance retry ID [--reason R]  go on with a failed instance from the step that failed
  weft instance pause ID... [--reason R] | resume ID... [--reason R]
      pause: it begins no step until resumed, and keeps the timers and events that come
      meanwhile for then (docs/operations.md#pause-and-resume); resume: it goes on
  weft instance reset ID --step S [--reason R] | reset-points ID
      reset: run it again from a top-level step it began, with the variables it had when the
      step began (docs/operations.md#reset); reset-points: the steps it can be reset to
  weft instance migrate ID [--to-version N] [--plugin NAME=SHA256]... [--dry-run]
                           [--retry|--resume] [--reason R]
      move it to another version of its workflow (default: the latest) or of its plugins,
      printing the plan; --dry-run sends nothing; --retry or --resume it once moved
      (docs/operations.md#migrate); admin
  weft instance export ID [--file FILE] | import FILE|- [--id ID] [--replace]
  weft search-attributes          the registered search attributes: name, type, first workflow
  weft event send NAME [--key KEY] [--payload JSON|@FILE] [--id ID] [--priority N]
      --priority: that of the instances its triggers start, 1 to 5
  weft event ls [--limit N] [--cursor C]
                                  the queued events: sent with nothing waiting for them yet
  weft event dead [--limit N] [--cursor C]
                                  the events that expired with nothing waiting for them
  weft schedule create FILE|- | update FILE|-
      save a schedule document (YAML or JSON, docs/schedules.md) as it is in the file:
      create refuses an id that exists, update one that does not
  weft schedule ls [--limit N] [--cursor C]
  weft schedule show ID [--events N]
      its spec and policy, its next 10 fires (in UTC and its zone), its runs, its last N events
  weft schedule pause ID [--note TEXT] | unpause ID [--note TEXT]
  weft schedule trigger ID [--overlap POLICY]
                                  a run now, under the schedule's overlap policy or POLICY
  weft schedule backfill ID --from T --to T [--overlap POLICY]
      the runs of the times its calendar names from T to T (RFC 3339 or a duration ago)
  weft schedule rm ID             deletes it and its record; the runs it started go on
  weft batch start OP (--query Q | --ids FILE|-) [--reason R] [--rate N] [--yes] [--watch]
                   [--event E [--key K] [--payload JSON|@FILE]] [--step S] [--dry-run]
                   [--to-version N] [--plugin NAME=SHA256]... [--retry|--resume]
      OP (cancel, retry, pause, resume, delete, signal, migrate, reset) applied on the host
      to each instance --query matches or --ids FILE lists, one id a line, at --rate a second
      (docs/operations.md#batch-operations); the batch of a query asks "N instances match;
      OP them? [y/N]" on a terminal, and without one needs --yes (else it is left waiting
      for weft batch confirm); --watch: its progress until it ends; a migrate may --retry or
      --resume each moved instance; delete and migrate: admin
  weft batch ls [--limit N] [--cursor C] | show ID [--watch]
  weft batch items ID [--outcome O] [--limit N] [--cursor C]
                                  each instance and what became of it: done, skipped, failed…
  weft batch confirm ID [--watch] | cancel ID [--reason R]
  weft flow ls [--workflow W] [--limit N] [--cursor C]
      the concurrency keys, the steps' and the workflows', with running or waiting work
      (docs/flow-control.md): running against the limit, waiting, the oldest wait, the policy
  weft flow show WORKFLOW [KEY] [--limit N] [--cursor C]
      one key (KEY absent: the workflow-wide key ""): who holds its slots, and its line
  weft flow show --step KEY [--limit N] [--cursor C]
      one key of the activity steps' concurrency limits: the attempts holding its slots, its line
  weft flow rates [--kind step|host] [--prefix P] [--limit N]
      the keys of the steps' and the host rules' rate limits whose granted turns reach past
      now: the terms, the turns granted that have not come yet, when the next turn would come
  weft admin status               whether the host is alive and ready (exit 0 only when ready)
  weft admin refresh [WORKFLOW...]
  weft admin backup FILE|-        a backup of the embedded store, taken while the host runs
  weft attempt ls INSTANCE_ID     the instance's recorded attempts (docs/http-api.md#tapes)
  weft attempt replay INSTANCE_ID --step STEP --attempt N [--exec E] [--plugin FILE.wasm]
      replays a recorded attempt against its version, or a candidate module (admin); STEP is
      the step's id or path;
      exit 0 when it ended as recorded, 1 otherwise
  weft attempt export INSTANCE_ID --step STEP --attempt N [--exec E] [--module FILE.wasm] --file FILE|-
      a bundle of the recorded attempt and its module (admin), which
      weft plugin call --replay BUNDLE [--plugin FILE.wasm] replays offline

A plugin, locally, without a server:
  weft plugin new NAME [-dir DIR] [-module PATH] [-sdk DIR]
      write a Go plugin module: two activities, a test, a Makefile, a README,
      and NAME-demo.yaml, a workflow that calls them
  weft plugin check FILE.wasm
      validate a plugin against the ABI and list its activities
  weft plugin call FILE.wasm ACTIVITY [flags]
      run one activity call in the host's sandbox and print its output
      -input JSON|@FILE   the input document (default null)
      -attempt N          the attempt number the plugin sees (default 1)
      -last-heartbeat JSON  details of a previous attempt
      -config KEY=VALUE   a configuration value (repeatable)
      -secret NAME=REF    a secret, REF being env:VARIABLE or file:/path (repeatable)
      -host PATTERN       a host its HTTP requests may reach (repeatable)
      -private-networks   let the -host rules reach loopback and private addresses
      -rate N/PERIOD      limit the -host rules' requests (with -burst N, -max-wait D,
                          -rate-key KEY, as plugin grant's)
      -timeout D          the call's deadline (default 30s)
      -cancel-at-heartbeat N  request cancellation when heartbeat N arrives
      -o text|json        json: the output or failure, logs, heartbeats and requests
  weft plugin call --replay BUNDLE [--plugin FILE.wasm] [-timeout D] [-o text|json]
      replay a recorded attempt that weft attempt export bundled, answered from its tape,
      with the bundle's module or a candidate; print the report (exit 0: as recorded)

Exit codes: 0 ok, 1 failed or refused, 2 usage, 3 server or transport error,
4 not found, 5 unauthorized or forbidden, 6 --wait=DURATION ended first, 130 interrupted.
`

// Command kit is the plugin Weft's own tests drive: small activities with
// exactly specified behaviour, including the misbehaving ones (spin, alloc,
// trap) that prove the host's limits.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o kit.wasm .
package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/weftworks/weft/sdk"
)

func init() {
	sdk.RegisterWithDescription("echo", "Returns its input unchanged.", echo)
	sdk.RegisterWithDescription("upper", `{"text": s} -> {"text": UPPER(s)}.`, sdk.Typed(upper))
	sdk.RegisterWithDescription("fail", "Fails attempts 1..fail_attempts with the given error, then returns {attempt}.", sdk.Typed(fail))
	sdk.RegisterWithDescription("work", "Works for ms, heartbeating every beat_ms; resumes from the last attempt's details.", sdk.Typed(work))
	sdk.RegisterWithDescription("sleep", `Sleeps {"ms": n} milliseconds without using the CPU, as an activity waiting on a slow service does.`, sdk.Typed(sleep))
	sdk.RegisterWithDescription("spin", "Loops forever and never heartbeats.", spin)
	sdk.RegisterWithDescription("alloc", `Allocates and touches {"mb": n} MiB.`, sdk.Typed(alloc))
	sdk.RegisterWithDescription("trap", "Panics.", trap)
	sdk.RegisterWithDescription("info", "Returns its call info.", sdk.Typed(info))
	sdk.RegisterWithDescription("log", "Logs lines at levels, prints stdout, logs the secret it is given the name of; fails attempts 1..fail_attempts, then returns {attempt}.", sdk.Typed(logLines))
}

func main() {}

func echo(_ *sdk.Context, input []byte) ([]byte, error) { return input, nil }

type text struct {
	Text string `json:"text"`
}

func upper(_ *sdk.Context, in text) (text, error) {
	return text{Text: strings.ToUpper(in.Text)}, nil
}

type failIn struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	FailAttempts *int   `json:"fail_attempts"`
}

type attemptOut struct {
	Attempt int `json:"attempt"`
}

func fail(ctx *sdk.Context, in failIn) (attemptOut, error) {
	attempt := ctx.Info().Attempt
	if in.FailAttempts == nil || attempt <= *in.FailAttempts {
		code := in.Code
		if code == "" {
			code = "kit_failure"
		}
		if in.Retryable {
			return attemptOut{}, sdk.Retryable(code, in.Message)
		}
		return attemptOut{}, sdk.NonRetryable(code, in.Message)
	}
	return attemptOut{Attempt: attempt}, nil
}

type workIn struct {
	MS        int64 `json:"ms"`
	BeatMS    int64 `json:"beat_ms"`
	StallAtMS int64 `json:"stall_at_ms"`
}

type progress struct {
	DoneMS int64 `json:"done_ms"`
}

type workOut struct {
	DoneMS      int64 `json:"done_ms"`
	ResumedFrom int64 `json:"resumed_from"`
	Attempt     int   `json:"attempt"`
}

// work simulates a long activity: a busy loop with short sleeps that counts
// elapsed milliseconds on top of where the previous attempt got to.
func work(ctx *sdk.Context, in workIn) (workOut, error) {
	attempt := ctx.Info().Attempt
	var last progress
	ctx.LastHeartbeat(&last)
	resumed := last.DoneMS
	if in.BeatMS <= 0 {
		in.BeatMS = 100
	}
	start := time.Now()
	done := resumed
	nextBeat := done
	stalled := false
	for done < in.MS {
		spinFor(200 * time.Microsecond)
		time.Sleep(time.Millisecond)
		done = resumed + time.Since(start).Milliseconds()
		if done > in.MS {
			done = in.MS
		}
		// A stalled guest never calls the host again, so it never sees a
		// cancellation either: only the host can stop it.
		stalled = stalled || attempt == 1 && in.StallAtMS > 0 && done >= in.StallAtMS
		if !stalled && done >= nextBeat {
			if ctx.Heartbeat(progress{DoneMS: done}) {
				return workOut{}, sdk.ErrCancelled
			}
			nextBeat = done + in.BeatMS
		}
	}
	if !stalled && ctx.Heartbeat(progress{DoneMS: done}) {
		return workOut{}, sdk.ErrCancelled
	}
	return workOut{DoneMS: done, ResumedFrom: resumed, Attempt: attempt}, nil
}

type sleepIn struct {
	MS int64 `json:"ms"`
}

// sleep waits in the host's poll_oneoff, which a cancellation or the
// attempt's deadline interrupts.
func sleep(_ *sdk.Context, in sleepIn) (sleepIn, error) {
	time.Sleep(time.Duration(in.MS) * time.Millisecond)
	return in, nil
}

func spinFor(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

// spin never returns and never calls the host: only the host's deadline
// can stop it.
func spin(_ *sdk.Context, _ []byte) ([]byte, error) {
	for i := uint64(0); ; i++ {
		runtime.KeepAlive(i) // a loop with a body, as real runaway code has
	}
}

type allocIn struct {
	MB int `json:"mb"`
}

type allocOut struct {
	MB  int `json:"mb"`
	Sum int `json:"sum"`
}

func alloc(_ *sdk.Context, in allocIn) (allocOut, error) {
	b := make([]byte, in.MB<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(i >> 12)
	}
	sum := 0
	for i := 0; i < len(b); i += 4096 {
		sum += int(b[i])
	}
	return allocOut{MB: in.MB, Sum: sum}, nil
}

func trap(_ *sdk.Context, _ []byte) ([]byte, error) {
	panic("kit: trap activity called")
}

type infoOut struct {
	InstanceID        string `json:"instance_id"`
	Workflow          string `json:"workflow"`
	StepID            string `json:"step_id"`
	Plugin            string `json:"plugin"`
	Activity          string `json:"activity"`
	Attempt           int    `json:"attempt"`
	IdempotencyKey    string `json:"idempotency_key"`
	DeadlineUnixMilli int64  `json:"deadline_unix_ms"`
	// TraceID and SpanID are the attempt's span when the host traces it;
	// absent otherwise, as in the info document (ABI §9), so that kit
	// and ckit answer alike for an untraced attempt.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

func info(ctx *sdk.Context, _ struct{}) (infoOut, error) {
	i := ctx.Info()
	return infoOut{
		InstanceID:        i.InstanceID,
		Workflow:          i.Workflow,
		StepID:            i.StepID,
		Plugin:            i.Plugin,
		Activity:          i.Activity,
		Attempt:           i.Attempt,
		IdempotencyKey:    i.IdempotencyKey,
		DeadlineUnixMilli: i.DeadlineUnixMilli,
		TraceID:           i.TraceID,
		SpanID:            i.SpanID,
	}, nil
}

type logIn struct {
	// Lines are logged through the log host function, each "LEVEL:text"
	// (debug, info, warn, error) or plain text at info, with the attempt's
	// number after it.
	Lines []string `json:"lines"`
	// Stdout is printed to stdout as it is.
	Stdout string `json:"stdout"`
	// Secret names a granted secret whose value is logged: what a careless
	// plugin does, and the host masks.
	Secret       string `json:"secret"`
	FailAttempts int    `json:"fail_attempts"`
}

// logLines makes an attempt's log, for the tests of what the host keeps of
// it, and fails like fail (retryably) while the attempt is within
// fail_attempts.
func logLines(ctx *sdk.Context, in logIn) (attemptOut, error) {
	attempt := ctx.Info().Attempt
	levels := map[string]sdk.Level{"debug": sdk.LevelDebug, "info": sdk.LevelInfo, "warn": sdk.LevelWarn, "error": sdk.LevelError}
	for _, l := range in.Lines {
		level, msg := sdk.LevelInfo, l
		if name, rest, ok := strings.Cut(l, ":"); ok {
			if lv, known := levels[name]; known {
				level, msg = lv, rest
			}
		}
		ctx.Logf(level, "%s (attempt %d)", msg, attempt)
	}
	if in.Stdout != "" {
		fmt.Print(in.Stdout)
	}
	if in.Secret != "" {
		ctx.Logf(sdk.LevelWarn, "the secret is %s", ctx.Secret(in.Secret))
	}
	if attempt <= in.FailAttempts {
		return attemptOut{}, sdk.Retryable("kit_failure", fmt.Sprintf("attempt %d fails", attempt))
	}
	return attemptOut{Attempt: attempt}, nil
}

package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/abi"
)

// host is the part of the Weft host an activity talks to. On wasm it is the
// host functions of the ABI; the SDK's own tests use a fake.
type host interface {
	heartbeat(details []byte) (cancelled bool)
	cancelled() bool
	info() []byte
	lastHeartbeat() ([]byte, bool)
	config(key string) (string, bool)
	log(level int32, msg string)

	// The functions below follow the ABI's sized convention themselves
	// ("(buf, cap) -> len", -1 when there is nothing), so that the SDK's
	// reading of them (sized) is tested against the fake host.

	// secret writes the value of the secret name into buf when it fits
	// and returns its length. A secret not granted stops the call in the
	// host: it does not return.
	secret(name string, buf []byte) int32
	// httpRequest sends a request and returns its status (100–599) or a
	// negative abi.HTTPError.
	httpRequest(method, url string, headers, body []byte) int32
	// httpResponseHeaders and httpResponseBody read the last response of
	// the call.
	httpResponseHeaders(buf []byte) int32
	httpResponseBody(buf []byte) int32
}

// Context is an activity call's view of the host. It is valid only during
// the handler call it was passed to.
type Context struct {
	host     host
	activity string
	info     *Info
	// header holds the header lines of the request being sent, reused:
	// the host reads them during http_request and keeps no reference.
	header []byte
}

// Info describes the activity call.
type Info struct {
	// InstanceID is the workflow instance the call belongs to.
	InstanceID string
	// Workflow is the workflow definition's name.
	Workflow string
	// StepID is the step that runs the activity.
	StepID string
	// Plugin and Activity name what runs.
	Plugin, Activity string
	// Attempt counts from 1.
	Attempt int
	// IdempotencyKey is the same for every attempt of one step execution;
	// use it to make external effects happen once.
	IdempotencyKey string
	// DeadlineUnixMilli is when the host stops this attempt; 0 when never.
	DeadlineUnixMilli int64
	// TraceID and SpanID are the W3C trace context of the attempt's span
	// (32 and 16 lowercase hex digits), for the plugin's own logs and
	// telemetry; both empty when the host does not trace the attempt.
	// Outbound requests need neither: the host adds the trace context
	// to them.
	TraceID, SpanID string
}

// Heartbeat proves that the activity is alive and records details, which
// are handed to the next attempt (see LastHeartbeat) if this one fails or
// times out. details is encoded as JSON; nil records no new details, and a
// []byte or json.RawMessage is taken as JSON as it is. It returns true when
// cancellation has been requested: the handler should stop and return
// ErrCancelled.
//
// Heartbeat does no I/O and is cheap; call it as often as progress allows.
func (c *Context) Heartbeat(details any) (cancelled bool) {
	var b []byte
	switch d := details.(type) {
	case nil:
	case []byte:
		b = d
	case json.RawMessage:
		b = d
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			c.Logf(LevelWarn, "heartbeat details not encodable, sent none: %v", err)
			b = nil
		}
	}
	return c.host.heartbeat(b)
}

// Cancelled reports whether cancellation has been requested.
func (c *Context) Cancelled() bool { return c.host.cancelled() }

// Info returns the call's information.
func (c *Context) Info() Info {
	if c.info == nil {
		var w abi.Info
		_ = json.Unmarshal(c.host.info(), &w)
		c.info = &Info{
			InstanceID:        w.InstanceID,
			Workflow:          w.Workflow,
			StepID:            w.StepID,
			Plugin:            w.Plugin,
			Activity:          w.Activity,
			Attempt:           w.Attempt,
			IdempotencyKey:    w.IdempotencyKey,
			DeadlineUnixMilli: w.DeadlineUnixMilli,
			TraceID:           w.TraceID,
			SpanID:            w.SpanID,
		}
		if c.info.Activity == "" {
			c.info.Activity = c.activity
		}
	}
	return *c.info
}

// LastHeartbeat decodes into v the details that the previous attempt of this
// step last recorded with Heartbeat. It reports false, leaving v alone, when
// there are none (first attempt, or no details recorded) or they do not
// decode into v.
func (c *Context) LastHeartbeat(v any) bool {
	b, ok := c.host.lastHeartbeat()
	if !ok {
		return false
	}
	if raw, isRaw := v.(*json.RawMessage); isRaw {
		*raw = append((*raw)[:0], b...)
		return true
	}
	return json.Unmarshal(b, v) == nil
}

// Config returns the configuration value named key, which the host's
// operator granted to this plugin (weft plugin grant NAME --config
// key=value). It reports false when the key is not granted, so that a
// plugin can fall back to a default. Declare the keys a plugin reads with
// Needs.
func (c *Context) Config(key string) (string, bool) { return c.host.config(key) }

// Secret returns the value of the secret name, which the host's operator
// granted to this plugin as a reference (weft plugin grant NAME --secret
// name=env:VAR or name=file:/path) that the host resolves when it is asked.
// Asking for a secret that is not granted stops the call with the failure
// code not_granted, which is not retried, so Secret has no error to return;
// declare the secrets a plugin reads with Needs, so that an operator sees
// them. Never log the value or put it in an output, a failure or heartbeat
// details: the host keeps it out of its own records, but cannot see where a
// plugin copies it.
func (c *Context) Secret(name string) string {
	b, _ := sized(func(buf []byte) int32 { return c.host.secret(name, buf) })
	return string(b)
}

// Level is a log level.
type Level int32

// Log levels.
const (
	LevelDebug Level = abi.LevelDebug
	LevelInfo  Level = abi.LevelInfo
	LevelWarn  Level = abi.LevelWarn
	LevelError Level = abi.LevelError
)

// Log appends msg to the activity's log.
func (c *Context) Log(level Level, msg string) { c.host.log(int32(level), msg) }

// Logf formats and logs a message.
func (c *Context) Logf(level Level, format string, args ...any) {
	c.host.log(int32(level), fmt.Sprintf(format, args...))
}

// Package otlptest is an OpenTelemetry collector for tests: a receiver
// on loopback that speaks OTLP over HTTP (POST /v1/traces, protobuf,
// gzip or not) and over gRPC (the TraceService), and keeps the spans it
// is sent, flattened, for assertions. Stop makes it a collector that is
// down; Restart brings it back on the same ports.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds a request body the HTTP receiver reads, inflated.
const maxBody = 64 << 20

// Span is one received span, flattened: its ids in hex (a root span's
// ParentSpanID is empty), its attributes and its resource's as Go values
// (string, bool, int64, float64, []any, map[string]any, []byte).
type Span struct {
	TraceID      string
	SpanID       string
	ParentSpanID string
	TraceState   string
	Name         string
	// Kind is OTLP's name without its prefix: "SERVER", "INTERNAL"…
	Kind       string
	Start, End time.Time
	Attributes map[string]any
	Events     []Event
	Links      []Link
	// StatusCode is "UNSET", "OK" or "ERROR".
	StatusCode    string
	StatusMessage string
	Resource      map[string]any
	// Scope is the instrumentation scope's name.
	Scope string
}

// Event is a span event.
type Event struct {
	Name       string
	Time       time.Time
	Attributes map[string]any
}

// Link is a span link.
type Link struct {
	TraceID    string
	SpanID     string
	Attributes map[string]any
}

// Receiver is a running OTLP receiver. Its methods are safe for
// concurrent use.
type Receiver struct {
	t testing.TB

	httpAddr, grpcAddr string

	mu       sync.Mutex
	spans    []Span
	requests int
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
	running  bool
	done     sync.WaitGroup
}

// Start starts a receiver on two loopback ports, stopped when the test
// ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{t: t}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listening for OTLP/HTTP: %v", err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listening for OTLP/gRPC: %v", errors.Join(err, hl.Close()))
	}
	r.httpAddr, r.grpcAddr = hl.Addr().String(), gl.Addr().String()
	r.serve(hl, gl)
	t.Cleanup(r.Stop)
	return r
}

// HTTPEndpoint is the OTLP/HTTP base URL, http://127.0.0.1:port; spans
// are posted to its /v1/traces.
func (r *Receiver) HTTPEndpoint() string { return "http://" + r.httpAddr }

// GRPCEndpoint is the OTLP/gRPC address, 127.0.0.1:port (plain text: an
// exporter is given http:// and this).
func (r *Receiver) GRPCEndpoint() string { return r.grpcAddr }

// Requests is how many export requests the receiver has answered.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Spans is a copy of the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// WaitForSpans polls the received spans until ok accepts them and returns
// them, or fails t after timeout with what it has.
func (r *Receiver) WaitForSpans(t testing.TB, ok func([]Span) bool, timeout time.Duration) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name)
			}
			t.Fatalf("otlptest: the spans received within %s are not those waited for: %d spans %q", timeout, len(spans), names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop stops both servers, closing their connections: a collector that
// is down. It is idempotent.
func (r *Receiver) Stop() {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return
	}
	r.running = false
	h, g := r.httpSrv, r.grpcSrv
	r.mu.Unlock()
	// Shutdown, not Close: it waits for the exports being answered, so
	// that none logs after the test.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		r.t.Errorf("otlptest: stopping the OTLP/HTTP server: %v", err)
	}
	g.Stop()
	r.done.Wait()
}

// Restart serves again on the same ports after Stop.
func (r *Receiver) Restart() {
	r.t.Helper()
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running {
		return
	}
	hl, err := net.Listen("tcp", r.httpAddr)
	if err != nil {
		r.t.Fatalf("otlptest: listening again on %s: %v", r.httpAddr, err)
	}
	gl, err := net.Listen("tcp", r.grpcAddr)
	if err != nil {
		r.t.Fatalf("otlptest: listening again on %s: %v", r.grpcAddr, errors.Join(err, hl.Close()))
	}
	r.serve(hl, gl)
}

// serve starts the servers on hl and gl.
func (r *Receiver) serve(hl, gl net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.handleHTTP)
	h := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(g, grpcService{r: r})
	r.mu.Lock()
	r.httpSrv, r.grpcSrv, r.running = h, g, true
	r.mu.Unlock()
	r.done.Add(2)
	go func() {
		defer r.done.Done()
		if err := h.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.t.Logf("otlptest: OTLP/HTTP server: %v", err)
		}
	}()
	go func() {
		defer r.done.Done()
		if err := g.Serve(gl); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			r.t.Logf("otlptest: OTLP/gRPC server: %v", err)
		}
	}()
}

// handleHTTP takes an OTLP/HTTP export: a protobuf
// ExportTraceServiceRequest, gzip-compressed or not.
func (r *Receiver) handleHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("otlptest: want Content-Type application/x-protobuf, got %q", ct), http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	switch req.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, "otlptest: bad gzip body: "+err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	default:
		http.Error(w, "otlptest: unsupported Content-Encoding", http.StatusUnsupportedMediaType)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil || len(raw) > maxBody {
		http.Error(w, "otlptest: reading the body failed or it is too large", http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, "otlptest: the body is not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	if _, err := w.Write(out); err != nil {
		r.t.Logf("otlptest: answering an export: %v", err)
	}
}

// grpcService is the receiver's TraceService.
type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

// Export implements collectortrace.TraceServiceServer.
func (s grpcService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// add keeps req's spans, flattened.
func (r *Receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, flatten(sp, res, ss.GetScope().GetName()))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.requests++
	r.mu.Unlock()
}

// flatten is sp as a Span.
func flatten(sp *tracepb.Span, res map[string]any, scope string) Span {
	out := Span{
		TraceID:       hex.EncodeToString(sp.GetTraceId()),
		SpanID:        hex.EncodeToString(sp.GetSpanId()),
		ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
		TraceState:    sp.GetTraceState(),
		Name:          sp.GetName(),
		Kind:          trimPrefix(sp.GetKind().String(), "SPAN_KIND_"),
		Start:         time.Unix(0, int64(sp.GetStartTimeUnixNano())),
		End:           time.Unix(0, int64(sp.GetEndTimeUnixNano())),
		Attributes:    attrs(sp.GetAttributes()),
		StatusCode:    trimPrefix(sp.GetStatus().GetCode().String(), "STATUS_CODE_"),
		StatusMessage: sp.GetStatus().GetMessage(),
		Resource:      res,
		Scope:         scope,
	}
	for _, e := range sp.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attributes: attrs(e.GetAttributes())})
	}
	for _, l := range sp.GetLinks() {
		out.Links = append(out.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId()), Attributes: attrs(l.GetAttributes())})
	}
	return out
}

// trimPrefix is s without prefix.
func trimPrefix(s, prefix string) string {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// attrs is kvs as a map of Go values.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value is v as a Go value.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrs(x.KvlistValue.GetValues())
	}
	return nil
}

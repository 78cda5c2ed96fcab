// Command otlpsink is the collector of bench/http.sh's traced runs: an
// OTLP/HTTP endpoint (POST /v1/traces) that reads each export and answers
// it, as a collector that keeps up does, without decoding or keeping the
// spans. It prints what it received when it is stopped (SIGTERM), so that
// a run can say how many bytes its spans cost on the wire.
//
//	otlpsink -listen 127.0.0.1:4318
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "the address to listen on")
	flag.Parse()
	var requests, bytes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		requests.Add(1)
		bytes.Add(n)
		// An empty body is an ExportTraceServiceResponse with nothing
		// rejected.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Addr: *listen, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		if err := srv.Shutdown(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "otlpsink:", err)
		}
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
	fmt.Printf("otlpsink: %d exports, %d bytes\n", requests.Load(), bytes.Load())
}

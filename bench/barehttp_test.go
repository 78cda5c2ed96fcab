package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
)

// bareHTTP is the floor under Weft's http_request: the import forwarded to
// Go's net/http with nothing around it — no grants, no address check, no
// limits, no deadline, no record, no idempotency key. Between net/http and
// it is what any wazero host pays to let a guest make a request (the
// crossing, and the guest's own code, which is not the host's to make
// faster); between it and weft is what Weft's checks and records cost.
type bareHTTP struct {
	client       *http.Client
	header, body []byte // the last response's, for the guest to read
}

// setupBareHTTP is the bare contender whose requests activity of wasm
// makes, with the input encode makes.
func setupBareHTTP(b *testing.B, url string, wasm []byte, activity string, encode func(url string, n int) ([]byte, error)) postFunc {
	h := &bareHTTP{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	b.Cleanup(h.client.CloseIdleConnections)
	call := newBareWith(b, wasm, stopInstrument, h)
	return func(n int) (int, error) {
		in, err := encode(url, n)
		if err != nil {
			return 0, err
		}
		out, err := call(context.Background(), activity, in)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(out))
	}
}

// export adds the HTTP host functions to the weft host module.
func (h *bareHTTP) export(fn func(string, api.GoModuleFunc, []api.ValueType, []api.ValueType)) {
	i32 := api.ValueTypeI32
	read := func(mod api.Module, ptr, n uint64) []byte {
		b, ok := mod.Memory().Read(uint32(ptr), uint32(n))
		if !ok {
			panic("http_request: an argument outside memory")
		}
		return b
	}
	fn(abi.ImportHTTPRequest, func(ctx context.Context, mod api.Module, stack []uint64) {
		req, err := http.NewRequestWithContext(ctx, string(read(mod, stack[0], stack[1])), string(read(mod, stack[2], stack[3])),
			bytes.NewReader(bytes.Clone(read(mod, stack[6], stack[7]))))
		if err != nil {
			panic(err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(string(read(mod, stack[4], stack[5])), "\n"), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok {
				req.Header.Add(name, strings.TrimSpace(value))
			}
		}
		resp, err := h.client.Do(req)
		if err != nil {
			stack[0] = api.EncodeI32(abi.HTTPUnreachable)
			return
		}
		h.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			stack[0] = api.EncodeI32(abi.HTTPUnreachable)
			return
		}
		h.header = h.header[:0]
		for name, values := range resp.Header {
			for _, v := range values {
				h.header = append(append(append(append(h.header, name...), ": "...), v...), '\n')
			}
		}
		stack[0] = api.EncodeI32(int32(resp.StatusCode))
	}, []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32})
	sized := func(src *[]byte) api.GoModuleFunc {
		return func(_ context.Context, mod api.Module, stack []uint64) {
			if n := uint32(len(*src)); n <= uint32(stack[1]) && !mod.Memory().Write(uint32(stack[0]), *src) {
				panic("a response read outside memory")
			}
			stack[0] = uint64(uint32(len(*src)))
		}
	}
	fn(abi.ImportHTTPResponseHeaders, sized(&h.header), []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportHTTPResponseBody, sized(&h.body), []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// Command webhook is a Weft plugin that delivers JSON documents to a
// webhook: an HTTP endpoint an operator grants it, with a bearer token.
//
// Activities:
//
//   - deliver: any JSON document -> {"status", "response_bytes"}
//
// It reads the configuration value url and the secret token, which an
// operator grants:
//
//	weft plugin grant webhook --host hooks.example.com \
//		--config url=https://hooks.example.com/in --secret token=env:WEBHOOK_TOKEN
//
// See README.md beside this file. Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o webhook.wasm .
//	tinygo build -target=wasip1 -buildmode=c-shared -o webhook.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weftworks/weft/sdk"
)

func init() {
	sdk.Needs(sdk.Requirements{Config: []string{"url"}, Secrets: []string{"token"}})
	sdk.RegisterWithDescription("deliver",
		"POSTs the input JSON document to the configured url with the bearer token; returns {status, response_bytes}. 5xx, 429, timeouts and unreachable hosts are retryable.",
		deliver)
}

func main() {}

// Failure codes. The http_ codes carry {"status"} or {"error"} details.
const (
	codeMissingURL = "missing_url" // no url is granted: non-retryable
	codeBadURL     = "bad_url"     // the url is not an absolute http(s) URL: non-retryable
	codeBadToken   = "bad_token"   // the token cannot be sent in a header: non-retryable
	code4xx        = "http_4xx"    // a 4xx other than 429: non-retryable
	code429        = "http_429"    // too many requests: retryable
	code5xx        = "http_5xx"    // a server error: retryable
)

// maxExcerpt is how much of a failed response's body the failure's
// details quote.
const maxExcerpt = 512

// output is what deliver returns after a 2xx response. Not the body: a
// receiver may echo the request, token included, and what an activity
// returns is kept in the instance's state for every reader to see.
type output struct {
	// Status is the response's status code.
	Status int `json:"status"`
	// ResponseBytes is the size of the response body.
	ResponseBytes int `json:"response_bytes"`
}

// deliver POSTs the input, as it is, to the configured url.
func deliver(ctx *sdk.Context, input []byte) ([]byte, error) {
	url, ok := ctx.Config("url")
	if !ok || url == "" {
		return nil, sdk.NonRetryable(codeMissingURL, "the plugin has no url to deliver to; grant one: weft plugin grant "+plugin(ctx)+" --config url=https://HOST/PATH --host HOST")
	}
	// The host stops the call (not_granted) when the token is not granted.
	token := ctx.Secret("token")
	if !headerSafe(token) {
		// Never quote the token, not even in part.
		return nil, sdk.NonRetryable(codeBadToken, "the secret token contains a control character (a line break, say), which a header cannot carry")
	}
	req := &sdk.Request{Method: "POST", URL: url, Header: sdk.Header{}, Body: input}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ctx.Do(req)
	if err != nil {
		return nil, failed(err)
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299:
		return json.Marshal(output{Status: s, ResponseBytes: len(resp.Body)})
	case s == 429:
		return nil, statusFailure(code429, true, resp, token)
	case s >= 500:
		return nil, statusFailure(code5xx, true, resp, token)
	case s >= 400:
		return nil, statusFailure(code4xx, false, resp, token)
	default: // 1xx, or a 3xx the host did not follow (304, no Location)
		return nil, statusFailure("http_"+strconv.Itoa(s/100)+"xx", false, resp, token)
	}
}

// failed turns an error from Do into a failure: timeouts and unreachable
// hosts may recover, a TLS failure or an answer that is not HTTP will not
// without an operator.
func failed(err error) error {
	var herr *sdk.HTTPError
	switch {
	case errors.As(err, &herr):
		retry := errors.Is(err, sdk.ErrHTTPTimeout) || errors.Is(err, sdk.ErrHTTPUnreachable)
		e := &sdk.Error{Code: "http_" + herr.Reason, Message: err.Error(), Retryable: retry}
		return e.WithDetails(map[string]string{"error": herr.Reason})
	case errors.Is(err, sdk.ErrInvalidRequest):
		// The token was checked above: what is left is the url. The
		// SDK's message does not quote it.
		return sdk.NonRetryable(codeBadURL, err.Error())
	}
	// The host broke a promise of the ABI; another attempt may not.
	return sdk.Retryable("http_error", err.Error())
}

// statusFailure is the failure for a response that is not a 2xx: its
// details hold the status, the start of the body and Retry-After. A
// receiver may quote the request in its answer (a 401 that shows the
// Authorization header it refused): the token is replaced wherever the
// body holds it, and the excerpt is cut from the body after that, so that
// no part of the token is quoted. (The host masks the secrets a plugin
// read in everything it records too; this plugin does not rely on it.)
func statusFailure(code string, retryable bool, resp *sdk.Response, token string) error {
	details := map[string]any{"status": resp.StatusCode}
	if len(resp.Body) > 0 {
		b := string(resp.Body)
		if token != "" {
			b = strings.ReplaceAll(b, token, "[secret]")
		}
		if len(b) > maxExcerpt {
			b = b[:maxExcerpt]
		}
		details["body"] = b
	}
	if ra := resp.Header().Get("Retry-After"); ra != "" {
		details["retry_after"] = ra
	}
	e := &sdk.Error{Code: code, Message: fmt.Sprintf("the webhook answered %d", resp.StatusCode), Retryable: retryable}
	return e.WithDetails(details)
}

// headerSafe reports whether s can be sent in a header value: no control
// characters but tab.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// plugin is the plugin's name, for a grant command in a message.
func plugin(ctx *sdk.Context) string {
	if p := ctx.Info().Plugin; p != "" {
		return p
	}
	return "webhook"
}

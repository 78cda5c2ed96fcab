package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
)

// TestAccessLogLevels: a request that succeeded is logged at debug, one
// the client got wrong at info, so that at the default level the log is
// the host's and the plugins' own.
func TestAccessLogLevels(t *testing.T) {
	t.Parallel()
	for _, debug := range []bool{false, true} {
		h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, debugLogs: debug})
		h.do("GET", "/v1/plugins", nil).want(t, http.StatusOK)
		h.do("GET", "/v1/plugins/nope", nil).want(t, http.StatusNotFound)
		var ok, missing bool
		for _, line := range strings.Split(h.logs.String(), "\n") {
			if !strings.Contains(line, `"msg":"http request"`) {
				continue
			}
			ok = ok || strings.Contains(line, `"path":"/v1/plugins","route"`) && strings.Contains(line, `"level":"DEBUG"`)
			missing = missing || strings.Contains(line, `"path":"/v1/plugins/nope"`) && strings.Contains(line, `"level":"INFO"`)
		}
		if ok != debug || !missing {
			t.Errorf("debug logs %v: logged the 200 at debug %v (want %v), the 404 at info %v:\n%s", debug, ok, debug, missing, h.logs.String())
		}
	}
}

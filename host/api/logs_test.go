package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
)

// logsFlow's first step logs (with the log host function, stdout, and a
// granted secret's value) and fails its first attempt; its second logs
// once.
const logsFlow = `
name: chatty
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["one", "warn:two"], stdout: "three\n", secret: token, fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 10ms }
  - id: after
    activity: kit.log
    input: { lines: ["error:four"] }
    output: said
output: "${ vars.said }"
`

// logsSecret is the granted secret kit.log logs; it must appear nowhere.
const logsSecret = "s3cr3t-token-value-9731"

// TestInstanceLogs, on the embedded store and on Redis: GET
// /v1/instances/{id}/logs answers the lines each attempt's guest logged,
// oldest first, each with the seq of the history entry that ended its
// attempt, the node, the step and the attempt; a secret the guest logged is
// masked there, in the history and in the node's own log, which still gets
// every line; the filters and the pages (limit, after, next_cursor) cut
// the same list; an unknown instance is a 404.
func TestInstanceLogs(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{node.StoreEmbedded, node.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := hostOptions{api: api.Config{Tokens: testTokens()}, attemptDataLimit: 1 << 10}
			if kind == node.StoreRedis {
				o.node = node.Config{Store: node.StoreRedis, RedisAddrs: []string{redistest.Start(t).Addr()}}
			}
			h := newHostWith(t, o)
			secretFile := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(secretFile, []byte(logsSecret), 0o600); err != nil {
				t.Fatal(err)
			}
			h.pushKit()
			h.request("PUT", "/v1/plugins/kit/grants", adminSecret, "application/json", []byte(`{"secrets":{"token":"file:`+secretFile+`"}}`)).want(t, http.StatusOK)
			h.putWorkflow("chatty", logsFlow)
			var in instance
			h.do("POST", "/v1/workflows/chatty/instances?wait=60s", map[string]any{"id": "talker"}).want(t, http.StatusCreated).json(t, &in)
			if in.Status != "completed" || string(in.Output) != `{"attempt":1}` {
				t.Fatalf("instance %s, output %s, error %s", in.Status, in.Output, in.Error)
			}

			// The whole list, as a reader may read it.
			all := h.request("GET", "/v1/instances/talker/logs", readerSecret, "", nil).want(t, http.StatusOK)
			if strings.Contains(string(all.body), logsSecret) {
				t.Fatalf("the logs hold the secret: %s", all.body)
			}
			var page pageDoc[weft.LogEntry]
			all.json(t, &page)
			got := logLines(page.Items)
			want := []string{
				"steps[0]#1 info log one (attempt 1)",
				"steps[0]#1 warn log two (attempt 1)",
				"steps[0]#1 info stdout three",
				"steps[0]#1 warn log the secret is [secret]",
				"steps[0]#2 info log one (attempt 2)",
				"steps[0]#2 warn log two (attempt 2)",
				"steps[0]#2 info stdout three",
				"steps[0]#2 warn log the secret is [secret]",
				"steps[1]#1 error log four (attempt 1)",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") || page.NextCursor == nil || *page.NextCursor != "" {
				t.Fatalf("logs:\n%s\nnext_cursor %v; want:\n%s", strings.Join(got, "\n"), page.NextCursor, strings.Join(want, "\n"))
			}

			// Each line names the entry that ended its attempt.
			var hist pageDoc[weft.HistoryEntry]
			h.do("GET", "/v1/instances/talker/history", nil).want(t, http.StatusOK).json(t, &hist)
			if histBody, _ := json.Marshal(hist); strings.Contains(string(histBody), logsSecret) {
				t.Fatalf("the history holds the secret: %s", histBody)
			}
			ends := map[uint64]weft.HistoryEntry{}
			for _, e := range hist.Items {
				ends[e.Seq] = e
			}
			for _, l := range page.Items {
				e, ok := ends[l.Seq]
				wantType := weft.HistoryActivityCompleted
				if l.StepPath == "steps[0]" && l.Attempt == 1 {
					wantType = weft.HistoryActivityFailed
				}
				if !ok || e.Type != wantType || e.StepPath != l.StepPath || e.Attempt != l.Attempt || l.Node != "n1" || e.Node != "n1" {
					t.Errorf("line %+v: its entry is %+v, want the %s of its attempt on n1", l, e, wantType)
				}
				if l.Time.IsZero() || l.Time.After(time.Now()) || l.Time.Before(in.CreatedAt) {
					t.Errorf("line %q at %s: want a time since the instance started (%s)", l.Message, l.Time, in.CreatedAt)
				}
			}
			// The attempt's input as sent, and its output, are in the
			// history too.
			for _, e := range hist.Items {
				if e.Type == weft.HistoryActivityScheduled && e.StepPath == "steps[1]" && !strings.Contains(string(e.Data), `"input":{"lines":["error:four"]}`) {
					t.Errorf("activity_scheduled of steps[1]: data %s, want its input", e.Data)
				}
				if e.Type == weft.HistoryActivityCompleted && e.StepPath == "steps[1]" && !strings.Contains(string(e.Data), `"output":{"attempt":1}`) {
					t.Errorf("activity_completed of steps[1]: data %s, want its output", e.Data)
				}
			}
			// The node's log still has every line, masked too.
			logged := h.logs.String()
			if !strings.Contains(logged, "plugin: one (attempt 2)") || !strings.Contains(logged, "plugin: four (attempt 1)") || strings.Contains(logged, logsSecret) {
				t.Errorf("the node's log lacks the guest's lines or holds the secret:\n%s", logged)
			}

			// Filters.
			for _, f := range []struct {
				query string
				want  []string
			}{
				{"step_path=steps[0]", want[:8]},
				{"attempt=2", want[4:8]},
				{"step_path=steps[1]&attempt=1", want[8:]},
				{"step_path=steps[9]", nil},
				{"after=" + strconv.FormatUint(page.Items[3].Seq, 10), want[4:]},
			} {
				var p pageDoc[weft.LogEntry]
				h.do("GET", "/v1/instances/talker/logs?"+query(f.query), nil).want(t, http.StatusOK).json(t, &p)
				if g := logLines(p.Items); strings.Join(g, "\n") != strings.Join(f.want, "\n") {
					t.Errorf("?%s:\n%s\nwant:\n%s", f.query, strings.Join(g, "\n"), strings.Join(f.want, "\n"))
				}
			}

			// Pages of every size cut the same list, within an entry's
			// lines and at their ends, through next_cursor alone.
			for limit := 1; limit <= len(want)+1; limit++ {
				var lines []string
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > len(want)+1 {
						t.Fatalf("limit %d: more pages than lines", limit)
					}
					var p pageDoc[weft.LogEntry]
					h.do("GET", "/v1/instances/talker/logs?limit="+strconv.Itoa(limit)+"&cursor="+url.QueryEscape(cursor), nil).want(t, http.StatusOK).json(t, &p)
					if len(p.Items) > limit {
						t.Fatalf("limit %d: a page of %d", limit, len(p.Items))
					}
					lines = append(lines, logLines(p.Items)...)
					if *p.NextCursor == "" {
						break
					}
					cursor = *p.NextCursor
				}
				if strings.Join(lines, "\n") != strings.Join(want, "\n") {
					t.Errorf("limit %d: the pages hold:\n%s", limit, strings.Join(lines, "\n"))
				}
			}

			// Refusals.
			if p := h.do("GET", "/v1/instances/nope/logs", nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, `"nope"`) {
				t.Errorf("unknown instance: detail %q does not name it", p.Detail)
			}
			for _, q := range []string{"after=x", "after=3.0", "attempt=0", "attempt=x", "limit=0"} {
				h.do("GET", "/v1/instances/talker/logs?"+q, nil).want(t, http.StatusBadRequest).problem(t)
			}
			h.request("GET", "/v1/instances/talker/logs", "", "", nil).want(t, http.StatusUnauthorized)
		})
	}
}

// logLines formats lines as "STEP#ATTEMPT LEVEL SOURCE MESSAGE".
func logLines(items []weft.LogEntry) []string {
	var out []string
	for _, l := range items {
		out = append(out, l.StepPath+"#"+strconv.Itoa(l.Attempt)+" "+l.Level+" "+l.Source+" "+l.Message)
	}
	return out
}

// query escapes the values of a query written plainly.
func query(q string) string {
	v := url.Values{}
	for _, kv := range strings.Split(q, "&") {
		k, val, _ := strings.Cut(kv, "=")
		v.Add(k, val)
	}
	return v.Encode()
}

// raceFlow runs an attempt that logs beside one that fails the instance:
// whichever ends first, the logging attempt's lines are kept (applied,
// or ignored after the failure, where it ran).
const raceFlow = `
name: race
steps:
  - id: both
    parallel:
      - steps: [ { id: talk, activity: kit.log, input: { lines: ["info:said before the end"] } } ]
      - steps: [ { id: bad, activity: kit.fail, input: { fail_attempts: 9, code: boom, message: no }, retry: { max_attempts: 1 } } ]
`

// TestLogsOfAnAttemptTheInstanceNoLongerWaitedFor: the lines of an attempt
// whose end came after its instance failed are served with the others, at
// its step and attempt.
func TestLogsOfAnAttemptTheInstanceNoLongerWaitedFor(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("race", raceFlow)
	for i := range 5 {
		id := fmt.Sprintf("race-%d", i)
		h.do("POST", "/v1/workflows/race/instances?wait=60s", map[string]any{"id": id}).want(t, http.StatusCreated)
		h.awaitStatus(id, "failed")
		// The logging attempt may end after the instance finished: wait
		// for its end in the history, applied or ignored.
		deadline := time.Now().Add(time.Minute)
		for {
			var logs pageDoc[struct {
				StepPath string `json:"step_path"`
				Attempt  int    `json:"attempt"`
				Message  string `json:"message"`
			}]
			h.do("GET", "/v1/instances/"+id+"/logs", nil).want(t, http.StatusOK).json(t, &logs)
			if len(logs.Items) == 1 {
				if l := logs.Items[0]; l.StepPath != "steps[0].parallel[0][0]" || l.Attempt != 1 || !strings.HasPrefix(l.Message, "said before the end") {
					t.Fatalf("%s: line %+v, want the talk step's attempt 1", id, l)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: logs %+v after a minute, want the talk step's line", id, logs.Items)
			}
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
	}
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

// logsScanLimit bounds the history entries one logs request reads looking
// for lines: a long history with few logged lines (or none that match the
// filters) is answered in pages that may be short, with a cursor to go on,
// rather than read whole within one request.
const logsScanLimit = 10 * weft.MaxListLimit

// logsCursor is where a page of log lines starts: after the line skip of
// the history entry seq, or after the whole entry when skip is 0. It is
// written "SEQ", or "SEQ.SKIP" when a page ended inside an entry's lines,
// so that a history seq is a cursor too.
type logsCursor struct {
	seq  uint64
	skip int
}

func parseLogsCursor(s string) (logsCursor, error) {
	if s == "" {
		return logsCursor{}, nil
	}
	seq, skip, split := strings.Cut(s, ".")
	var c logsCursor
	var err error
	if c.seq, err = strconv.ParseUint(seq, 10, 64); err != nil {
		return c, err
	}
	if split {
		if c.skip, err = strconv.Atoi(skip); err != nil || c.skip < 1 || c.seq == 0 {
			return c, fmt.Errorf("bad line count %q", skip)
		}
	}
	return c, nil
}

func (c logsCursor) String() string {
	if c.skip == 0 {
		return strconv.FormatUint(c.seq, 10)
	}
	return strconv.FormatUint(c.seq, 10) + "." + strconv.Itoa(c.skip)
}

// keepsLogs reports whether entries of type t may hold an attempt's log
// lines: the end of an attempt, applied, refused (another node took the
// instance over, or the instance no longer waited for it) or ignored (the
// instance had finished).
func keepsLogs(t weft.HistoryType) bool {
	switch t {
	case weft.HistoryActivityCompleted, weft.HistoryActivityFailed, weft.HistoryLateCompletionRefused,
		weft.HistoryEventRefused, weft.HistoryEventIgnored:
		return true
	}
	return false
}

// instanceLogs answers the log lines of an instance's attempts, read from
// its history, oldest first: the lines of each entry that ends an attempt
// (weft.AttemptLogs), filtered by step_path and attempt.
func (s *Server) instanceLogs(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	raw := c.Query("after", c.Query("cursor"))
	from, err := parseLogsCursor(raw)
	if err != nil {
		return invalidField("after", "must be a history sequence number or a next_cursor of this endpoint, got %q", raw)
	}
	stepPath := c.Query("step_path")
	attempt := 0
	if c.Query("attempt") != "" {
		if attempt, err = intParam(c, "attempt", 0, 1, 1<<31-1); err != nil {
			return err
		}
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	// ?step= selects by the step's id or path, resolved against the
	// instance's definition, so that a step it does not have is refused
	// rather than answered with no lines.
	match := func(string) bool { return true }
	if step := c.Query("step"); step != "" {
		if match, err = s.stepMatcher(ctx, id, step); err != nil {
			return err
		}
	}
	items := make([]apiv1.LogEntry, 0, min(limit, 64))
	// A cursor inside an entry reads that entry again, for its other lines.
	after, skip := from.seq, 0
	if from.skip > 0 {
		after, skip = from.seq-1, from.skip
	}
	for scanned := 0; scanned < logsScanLimit; {
		evs, err := s.node.History(ctx, id, after, weft.MaxListLimit)
		if errors.Is(err, weft.ErrNotFound) {
			return notFoundf("no instance %q", id)
		}
		if err != nil {
			return err
		}
		for _, e := range evs {
			if len(items) == limit {
				// Full with the lines of the entries up to after.
				return c.JSON(newPage(items, logsCursor{seq: after}.String()))
			}
			after = e.Seq
			scanned++
			if !keepsLogs(e.Type) || (stepPath != "" && e.StepPath != stepPath) || !match(e.StepPath) || (attempt != 0 && e.Attempt != attempt) || len(e.Data) == 0 {
				skip = 0
				continue
			}
			var logs weft.AttemptLogs
			if err := json.Unmarshal(e.Data, &logs); err != nil {
				return fmt.Errorf("instance %s: the data of history entry %d: %w", id, e.Seq, err)
			}
			lines := logs.Lines
			if e.Seq == from.seq && skip > 0 {
				lines = lines[min(skip, len(lines)):]
			}
			given := len(logs.Lines) - len(lines)
			skip = 0
			for _, l := range lines {
				if len(items) == limit {
					// Full inside this entry (given is at least 1): the
					// next page starts at its next line.
					return c.JSON(newPage(items, logsCursor{seq: e.Seq, skip: given}.String()))
				}
				items = append(items, apiv1.LogEntry{Seq: e.Seq, StepPath: e.StepPath, Attempt: e.Attempt, Node: e.Node,
					Time: l.Time, Level: apiv1.LogLevel(l.Level), Source: l.Source, Message: l.Message})
				given++
			}
		}
		if len(evs) < weft.MaxListLimit {
			// The end of the history: a full page still says where the
			// next would start, as the history endpoint does.
			next := ""
			if len(items) == limit {
				next = logsCursor{seq: after}.String()
			}
			return c.JSON(newPage(items, next))
		}
	}
	// Scanned as far as one request may: the page may be short, and goes on
	// from the last entry read.
	return c.JSON(newPage(items, logsCursor{seq: after}.String()))
}

// stepMatcher resolves ?step= against the definition instance id runs: a
// step id, or a path as the definition or the history writes it
// (steps[1].then[0], steps[2].do#3[0]). It returns whether a history
// entry's step_path is of that step: every iteration of a step in a
// foreach, for an id or a path without an iteration; that one iteration
// for a path with it. A step the definition does not have is a 400 that
// names it.
func (s *Server) stepMatcher(ctx context.Context, id, step string) (func(string) bool, error) {
	inst, err := s.node.Instance(ctx, id)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, notFoundf("no instance %q", id)
	}
	if err != nil {
		return nil, err
	}
	d, err := s.node.Definition(ctx, inst.Workflow, inst.Version)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, invalidField("step", "workflow %q version %d, which instance %q runs, is deleted, so step %q cannot be resolved; filter by step_path instead", inst.Workflow, inst.Version, id, step)
	}
	if err != nil {
		return nil, err
	}
	steps, err := node.DefinitionSteps(d)
	if err != nil {
		return nil, fmt.Errorf("instance %s: workflow %s version %d: %w", id, inst.Workflow, inst.Version, err)
	}
	want := definitionPath(step)
	var found string
	var ids []string
	for _, st := range steps {
		ids = append(ids, st.ID)
		if st.ID == step || st.Path == want {
			found = st.Path
		}
	}
	if found == "" {
		if len(ids) > 20 {
			ids = append(ids[:20], "…")
		}
		return nil, invalidField("step", "workflow %q version %d has no step %q (by id or path); its steps: %s", inst.Workflow, inst.Version, step, strings.Join(ids, ", "))
	}
	if strings.Contains(step, "#") {
		// One iteration of a step in a foreach, as the history names it.
		return func(p string) bool { return p == step }, nil
	}
	return func(p string) bool { return definitionPath(p) == found }, nil
}

var (
	// iterationRE is the iteration a foreach's children's paths carry in
	// the history (steps[2].do#3[0]) and the definition's do not.
	iterationRE = regexp.MustCompile(`#[0-9]+`)
	// branchRE is a parallel branch's list as the history writes it
	// (steps[1].parallel[0][2]); the definition writes
	// steps[1].parallel[0].steps[2].
	branchRE = regexp.MustCompile(`\.parallel\[([0-9]+)\]\[`)
)

// definitionPath returns the definition's path of the step at path, as the
// history writes it.
func definitionPath(path string) string {
	return branchRE.ReplaceAllString(iterationRE.ReplaceAllString(path, ""), ".parallel[$1].steps[")
}

package plugins

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/plugins/call"
)

// Masking keeps secret values out of everything a call hands back: it is
// done here, at the plugin boundary, so that nothing unmasked leaves a
// call (docs/outbound-http.md, "Secrets"). What a call hands back is its
// output, its failure (code, message, details), the host's own error
// messages (which may quote guest bytes), the guest's stderr, its log
// records, its heartbeat details and the records of its HTTP requests.
//
// The values masked in a call are those the guest read in it and those
// any guest of the same plugin name or of the same version read on this
// node before (secretsSeen): a guest can keep a value in its memory from
// one call to the next, and can only hold a value it read on this node,
// since a guest's memory never leaves the node.

// secretMark replaces a secret's value.
const secretMark = "[secret]"

// minSecret is the shortest value masked: masking shorter ones would
// mangle ordinary text and hide nothing.
const minSecret = 4

// maxSeenSecrets is how many values secretsSeen keeps per plugin name and
// per version: the most recent, so that a rotated value stays masked while
// guests may still hold it.
const maxSeenSecrets = 64

// withheldOutput stands for an output that masking its secrets left
// without a JSON document (a secret written as a JSON number, say).
const withheldOutput = `"[withheld: the output held a secret the activity read]"`

// withheldDetails stands for failure or heartbeat details that masking
// left without a JSON document.
const withheldDetails = `"[withheld: the details held a secret the activity read]"`

// secretsSeen is the secret values the guests of this node read, by plugin
// name and by version, the most recent maxSeenSecrets of each. It is safe
// for concurrent use; its zero value is empty and ready.
type secretsSeen struct {
	// some is set once a value was added: a node whose plugins read no
	// secret looks nothing up.
	some atomic.Bool
	mu   sync.Mutex
	// by holds the values under seenKey; a slice is never changed once
	// stored (add stores a new one), so that get's callers read it
	// without the lock.
	by map[string][]string
}

// seenKey is the key of secretsSeen.by for a plugin name ("p") or a
// version ("v").
func seenKey(kind byte, name string) string { return string([]byte{kind, 0}) + name }

// add records the values a call of plugin at version read.
func (s *secretsSeen) add(plugin, version string, values map[string]string) {
	if len(values) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string][]string{}
	}
	for _, key := range []string{seenKey('p', plugin), seenKey('v', version)} {
		old := s.by[key]
		var fresh []string
		for _, v := range values {
			if len(v) >= minSecret && !slices.Contains(old, v) && !slices.Contains(fresh, v) {
				fresh = append(fresh, v)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		all := append(slices.Clip(old), fresh...) // a new array: old stays as it was
		s.by[key] = all[max(0, len(all)-maxSeenSecrets):]
	}
	s.some.Store(true)
}

// get returns the values recorded for plugin and for version.
func (s *secretsSeen) get(plugin, version string) (byPlugin, byVersion []string) {
	if !s.some.Load() {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[seenKey('p', plugin)], s.by[seenKey('v', version)]
}

// secretForms returns the forms in which each value may appear in what a
// guest hands back, longest first: as it is, escaped in a JSON string (with
// and without HTML escaping), quoted by Go's %q (the host's excerpts),
// percent-encoded for a URL path or query, and, for a value that is a URL,
// its path (a webhook URL's secret part: a request record holds the path).
func secretForms(values ...[]string) []string {
	var forms []string
	add := func(f string) {
		if len(f) >= minSecret && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, vs := range values {
		for _, v := range vs {
			if len(v) < minSecret {
				continue
			}
			add(v)
			if q, err := json.Marshal(v); err == nil {
				add(string(q[1 : len(q)-1]))
			}
			if q, err := jsonv.Marshal(v); err == nil {
				add(string(q[1 : len(q)-1]))
			}
			q := strconv.Quote(v)
			add(q[1 : len(q)-1])
			add(url.PathEscape(v))
			add(url.QueryEscape(v))
			if u, err := url.Parse(v); err == nil && u.IsAbs() && len(u.Path) >= 8 {
				add(u.Path)
				add(u.EscapedPath())
			}
		}
	}
	// Longest first: a form inside a longer one (a URL's path) must not
	// break the longer one before it is replaced whole.
	slices.SortStableFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return forms
}

// maskForms returns the forms of every value the call masks: those its
// guest read in it and those secretsSeen holds for its plugin and
// version. Built when first needed, and again after the guest read
// another secret.
func (cs *callState) maskForms() []string {
	if cs.masksBuilt && cs.masksFor == len(cs.secrets) {
		return cs.masks
	}
	plugin := ""
	if cs.call != nil {
		plugin = cs.call.Info.Plugin
	}
	byPlugin, byVersion := cs.rt.seen.get(plugin, cs.version)
	read := make([]string, 0, len(cs.secrets))
	for _, v := range cs.secrets {
		read = append(read, v)
	}
	cs.masks, cs.masksBuilt, cs.masksFor = secretForms(read, byPlugin, byVersion), true, len(cs.secrets)
	return cs.masks
}

// mask replaces the secrets of the call (maskForms) in s with "[secret]".
// A guest that logs or returns a secret is at fault; the host still keeps
// the value out of what it records and serves.
func (cs *callState) mask(s string) string { return maskWith(cs.maskForms(), s) }

func maskWith(forms []string, s string) string {
	for _, f := range forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, secretMark)
		}
	}
	return s
}

// maskCut is mask for a text the host may have cut: the host's excerpts
// of guest bytes (which end `"…`) and a kept stderr (cut at its end when
// cut is set). There a value may appear only in part, its start at the
// cut, and that start is masked too.
func (cs *callState) maskCut(s string, cut bool) string { return maskCutWith(cs.maskForms(), s, cut) }

func maskCutWith(forms []string, s string, cut bool) string {
	if len(forms) == 0 {
		return s
	}
	s = maskWith(forms, s)
	var ends []int
	for i := 0; ; {
		j := strings.Index(s[i:], "\"…")
		if j < 0 {
			break
		}
		ends = append(ends, i+j)
		i += j + 1
	}
	if cut {
		ends = append(ends, len(s))
	}
	// From the last, so that a replacement does not move the cuts before
	// it.
	for i := len(ends) - 1; i >= 0; i-- {
		end := ends[i]
	forms:
		for _, f := range forms {
			for k := min(len(f)-1, end); k >= minSecret; k-- {
				if strings.HasSuffix(s[:end], f[:k]) {
					s = s[:end-k] + secretMark + s[end:]
					break forms
				}
			}
		}
	}
	return s
}

// maskDoc is mask for a JSON document. It returns doc itself when doc
// holds no secret, and withheld when masking left a document that is no
// longer JSON; a doc that was not JSON to begin with stays masked as it
// is, so that its consumer still reports the guest's violation.
func (cs *callState) maskDoc(doc []byte, withheld string) []byte {
	forms := cs.maskForms()
	out, changed := doc, false
	for _, f := range forms {
		if bytes.Contains(out, []byte(f)) {
			out, changed = bytes.ReplaceAll(out, []byte(f), []byte(secretMark)), true
		}
	}
	if changed && !json.Valid(out) && json.Valid(doc) {
		return []byte(withheld)
	}
	return out
}

// maskRequest masks what a request's record quotes of the guest's URL and
// method. The path is masked as a cut text: a record's fields may be
// bounded.
func (cs *callState) maskRequest(r call.Request) call.Request {
	r.Method = cs.mask(r.Method)
	r.Host = cs.maskCut(r.Host, true)
	r.Path = cs.maskCut(r.Path, true)
	return r
}

// maskErr returns err with the call's secrets masked in its message. An
// error whose message holds none is returned as it is; another becomes a
// *maskedError, which matches the same sentinels and hides the original.
func (cs *callState) maskErr(err error) error {
	if err == nil {
		return nil
	}
	if ge, ok := err.(*call.GuestError); ok { // masked field by field in outcome
		return ge
	}
	msg := err.Error()
	masked := cs.maskCut(msg, false)
	if masked == msg {
		return err
	}
	return newMaskedError(masked, err)
}

// maskStray masks text a guest of version wrote outside any call, with the
// values its guests read before.
func (r *Runtime) maskStray(version, text string) string {
	_, byVersion := r.seen.get("", version)
	return maskCutWith(secretForms(byVersion), text, false)
}

package embedded

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// decodeMeta decodes the JSON of an instance record without its documents
// (splitInst's meta) into r, which must be zero, as json.Unmarshal does.
// Every read of an instance decodes one, three per workflow at least (the
// run's read, its commit's, the caller's), and encoding/json's reflection
// made that a tenth of the CPU of a workflow in process. metaFast reads
// the records this store writes: the fields it knows, once each, with
// strings of printable ASCII without escapes, integers, booleans, times;
// on anything else it gives up, and encoding/json decodes the record (a
// failure, search attributes, an earlier version's documents, an escape).
// FuzzDecodeMeta checks that both agree.
func decodeMeta(meta []byte, r *instRecord) error {
	if metaFast(meta, r) {
		return nil
	}
	*r = instRecord{}
	return json.Unmarshal(meta, r)
}

// Bits of the fields metaFast has met, to give up on a repeated one
// (encoding/json merges a repeated object into the first).
const (
	mID = 1 << iota
	mWorkflow
	mVersion
	mStatus
	mPlugins
	mParent
	mPersistence
	mTrace
	mPriority
	mFairnessKey
	mFairnessWeight
	mConcurrency
	mHold
	mCreatedAt
	mUpdatedAt
	mRev
	mFence
	mLease
	mDeleteAfter
	mHistSeq
	mStateless
)

// metaFast is decodeMeta's fast path: false when it gives up (r is then
// partly written).
func metaFast(b []byte, r *instRecord) bool {
	s := metaScanner{b: b}
	var seen uint32
	ok := s.object(func(k []byte) bool {
		var bit uint32
		var ok bool
		switch string(k) {
		case "id":
			bit = mID
			r.ID, ok = s.str()
		case "workflow":
			bit = mWorkflow
			r.Workflow, ok = s.str()
		case "version":
			bit = mVersion
			r.Version, ok = s.int()
		case "status":
			bit = mStatus
			var v string
			v, ok = s.str()
			r.Status = weft.Status(v)
		case "plugins":
			bit = mPlugins
			r.Plugins = map[string]string{}
			ok = s.object(func(name []byte) bool {
				if _, dup := r.Plugins[string(name)]; dup {
					return false
				}
				v, ok := s.str()
				r.Plugins[string(name)] = v
				return ok
			})
		case "parent":
			bit = mParent
			p := &weft.ParentRef{}
			r.Parent = p
			ok = s.members(parentMembers, func(i int) (ok bool) {
				switch i {
				case 0:
					p.InstanceID, ok = s.str()
				case 1:
					p.StepID, ok = s.str()
				case 2:
					p.Token, ok = s.str()
				default:
					ok = s.members(orderMembers, func(i int) (ok bool) {
						switch i {
						case 0:
							p.Order.Priority, ok = s.int()
						case 1:
							p.Order.FairnessKey, ok = s.str()
						default:
							p.Order.FairnessWeight, ok = s.int()
						}
						return ok
					})
				}
				return ok
			})
		case "persistence":
			bit = mPersistence
			r.Persistence, ok = s.str()
		case "trace":
			bit = mTrace
			tr := &weft.Trace{}
			r.Trace = tr
			ok = s.members(traceMembers, func(i int) (ok bool) {
				switch i {
				case 0:
					tr.Span, ok = s.str()
				case 1:
					tr.Parent, ok = s.str()
				default:
					tr.Link, ok = s.str()
				}
				return ok
			})
		case "priority":
			bit = mPriority
			r.Priority, ok = s.int()
		case "fairness_key":
			bit = mFairnessKey
			r.FairnessKey, ok = s.str()
		case "fairness_weight":
			bit = mFairnessWeight
			r.FairnessWeight, ok = s.int()
		case "concurrency":
			bit = mConcurrency
			c := &weft.Concurrency{}
			r.Concurrency = c
			ok = s.members(concurrencyMembers, func(i int) (ok bool) {
				if i == 0 {
					c.Key, ok = s.str()
				} else {
					c.WaitingSince, ok = s.time()
				}
				return ok
			})
		case "hold":
			bit = mHold
			h := &weft.Hold{}
			r.Hold = h
			ok = s.members(holdMembers, func(int) (ok bool) {
				h.Since, ok = s.time()
				return ok
			})
		case "created_at":
			bit = mCreatedAt
			r.CreatedAt, ok = s.time()
		case "updated_at":
			bit = mUpdatedAt
			r.UpdatedAt, ok = s.time()
		case "rev":
			bit = mRev
			r.Rev, ok = s.uint()
		case "fence":
			bit = mFence
			r.Fence, ok = s.uint()
		case "lease":
			bit = mLease
			ok = s.members(leaseMembers, func(i int) (ok bool) {
				switch i {
				case 0:
					r.Lease.Node, ok = s.str()
				case 1:
					r.Lease.Boot, ok = s.str()
				default:
					r.Lease.Expiry, ok = s.time()
				}
				return ok
			})
		case "delete_after":
			bit = mDeleteAfter
			r.DeleteAfter, ok = s.time()
		case "hist_seq":
			bit = mHistSeq
			r.HistSeq, ok = s.uint()
		case "stateless":
			bit = mStateless
			r.Stateless, ok = s.bool()
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
	s.ws()
	return ok && s.i == len(s.b)
}

// metaScanner reads the JSON that metaFast accepts; each method reports
// false on anything else.
type metaScanner struct {
	b []byte
	i int
}

func (s *metaScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// lit consumes the byte c after white space.
func (s *metaScanner) lit(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, calling member with each key (valid until the
// next read), positioned at its value, which member reads.
func (s *metaScanner) object(member func(k []byte) bool) bool {
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return true
	}
	for {
		k, ok := s.raw()
		if !ok || !s.lit(':') || !member(k) {
			return false
		}
		if s.lit('}') {
			return true
		}
		if !s.lit(',') {
			return false
		}
	}
}

// The members of the objects inside a record, as members reads them.
var (
	parentMembers      = []string{"instance_id", "step_id", "token", "order"}
	orderMembers       = []string{"priority", "fairness_key", "fairness_weight"}
	traceMembers       = []string{"span", "parent", "link"}
	concurrencyMembers = []string{"key", "waiting_since"}
	holdMembers        = []string{"since"}
	leaseMembers       = []string{"node", "boot", "expiry"}
)

// members reads an object whose keys are among names, each once, calling
// read with the key's index, positioned at its value, which read reads.
func (s *metaScanner) members(names []string, read func(i int) bool) bool {
	var seen uint32
	return s.object(func(k []byte) bool {
		for i, n := range names {
			if string(k) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return read(i)
			}
		}
		return false
	})
}

// str reads a string of printable ASCII without escapes.
func (s *metaScanner) str() (string, bool) {
	v, ok := s.raw()
	return string(v), ok
}

// raw is str, as a slice of the record.
func (s *metaScanner) raw() ([]byte, bool) {
	if !s.lit('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

// digits reads an integer's digits: no sign, no leading zero (but 0), no
// fraction or exponent.
func (s *metaScanner) digits() (uint64, bool) {
	start := s.i
	var v uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	n := s.i - start
	if n == 0 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}

func (s *metaScanner) uint() (uint64, bool) {
	s.ws()
	return s.digits()
}

func (s *metaScanner) int() (int, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	v, ok := s.digits()
	switch {
	case !ok:
		return 0, false
	case neg && v <= 1<<63:
		return int(-int64(v)), true // -(1<<63) wraps to itself
	case !neg && v <= math.MaxInt64:
		return int(v), true
	}
	return 0, false
}

func (s *metaScanner) bool() (bool, bool) {
	s.ws()
	for _, w := range []string{"true", "false"} {
		if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
			s.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}

// time reads a time as encoding/json does (RFC 3339, strictly).
func (s *metaScanner) time() (time.Time, bool) {
	v, ok := s.raw()
	if !ok {
		return time.Time{}, false
	}
	var t time.Time
	if err := t.UnmarshalText(v); err != nil {
		return time.Time{}, false
	}
	return t, true
}

// encodeMeta returns the JSON of r without its documents, the bytes
// json.Marshal writes for it: field by field for the records metaFast
// reads (no failure, no search attributes), through encoding/json for the
// others. Every commit writes one. FuzzEncodeMeta checks the bytes.
func encodeMeta(r *instRecord) ([]byte, error) {
	meta := *r
	meta.Input, meta.Output, meta.Vars = nil, nil, nil
	if b, ok := appendMeta(make([]byte, 0, 384), &meta); ok {
		return b, nil
	}
	return json.Marshal(&meta)
}

// appendMeta appends r's JSON to b, as json.Marshal writes it; false when
// r holds what it leaves to encoding/json, or a time JSON cannot hold. r's
// documents must be nil (encodeMeta clears them): they are not written.
func appendMeta(b []byte, r *instRecord) ([]byte, bool) {
	if r.Error != nil || len(r.Search) > 0 {
		return nil, false
	}
	ok := true
	str := func(name, v string) {
		b = append(b, name...)
		b = jsonv.AppendString(b, v)
	}
	tm := func(name string, t time.Time) {
		b = append(b, name...)
		b = append(b, '"')
		var err error
		if b, err = t.AppendText(b); err != nil {
			ok = false
		}
		b = append(b, '"')
	}
	num := func(name string, v int64) {
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
	}
	str(`{"id":`, r.ID)
	str(`,"workflow":`, r.Workflow)
	num(`,"version":`, int64(r.Version))
	str(`,"status":`, string(r.Status))
	if len(r.Plugins) > 0 {
		b = append(b, `,"plugins":{`...)
		names := make([]string, 0, len(r.Plugins))
		for name := range r.Plugins {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonv.AppendString(b, name)
			b = append(b, ':')
			b = jsonv.AppendString(b, r.Plugins[name])
		}
		b = append(b, '}')
	}
	if p := r.Parent; p != nil {
		str(`,"parent":{"instance_id":`, p.InstanceID)
		str(`,"step_id":`, p.StepID)
		if p.Token != "" {
			str(`,"token":`, p.Token)
		}
		if p.Order != (weft.Order{}) {
			b = append(b, `,"order":{`...)
			n := len(b)
			b = appendOrder(b, p.Order)
			b = append(b[:n], b[n+1:]...) // the first member's comma
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if r.Persistence != "" {
		str(`,"persistence":`, r.Persistence)
	}
	if tr := r.Trace; tr != nil {
		str(`,"trace":{"span":`, tr.Span)
		if tr.Parent != "" {
			str(`,"parent":`, tr.Parent)
		}
		if tr.Link != "" {
			str(`,"link":`, tr.Link)
		}
		b = append(b, '}')
	}
	b = appendOrder(b, r.Order)
	if c := r.Concurrency; c != nil {
		str(`,"concurrency":{"key":`, c.Key)
		if !c.WaitingSince.IsZero() {
			tm(`,"waiting_since":`, c.WaitingSince)
		}
		b = append(b, '}')
	}
	if h := r.Hold; h != nil {
		tm(`,"hold":{"since":`, h.Since)
		b = append(b, '}')
	}
	tm(`,"created_at":`, r.CreatedAt)
	tm(`,"updated_at":`, r.UpdatedAt)
	b = append(b, `,"rev":`...)
	b = strconv.AppendUint(b, r.Rev, 10)
	b = append(b, `,"fence":`...)
	b = strconv.AppendUint(b, r.Fence, 10)
	b = append(b, `,"lease":{`...)
	sep := ""
	if r.Lease.Node != "" {
		str(`"node":`, r.Lease.Node)
		sep = ","
	}
	if r.Lease.Boot != "" {
		str(sep+`"boot":`, r.Lease.Boot)
		sep = ","
	}
	if !r.Lease.Expiry.IsZero() {
		tm(sep+`"expiry":`, r.Lease.Expiry)
	}
	b = append(b, '}')
	if !r.DeleteAfter.IsZero() {
		tm(`,"delete_after":`, r.DeleteAfter)
	}
	if r.HistSeq != 0 {
		b = append(b, `,"hist_seq":`...)
		b = strconv.AppendUint(b, r.HistSeq, 10)
	}
	if r.Stateless {
		b = append(b, `,"stateless":true`...)
	}
	return append(b, '}'), ok
}

// appendOrder appends o's members (those not zero), each after a comma:
// inline in an instance, or in a parent's object (whose caller drops the
// first comma).
func appendOrder(b []byte, o weft.Order) []byte {
	if o.Priority != 0 {
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, int64(o.Priority), 10)
	}
	if o.FairnessKey != "" {
		b = append(b, `,"fairness_key":`...)
		b = jsonv.AppendString(b, o.FairnessKey)
	}
	if o.FairnessWeight != 0 {
		b = append(b, `,"fairness_weight":`...)
		b = strconv.AppendInt(b, int64(o.FairnessWeight), 10)
	}
	return b
}

package embedded

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// fullRecord returns an instance record with every field set (by
// reflection, so that a field added to weft.Instance is set too), but
// those decodeMeta leaves to encoding/json and those not in the JSON.
func fullRecord(t testing.TB) *instRecord {
	t.Helper()
	at := time.Date(2026, 11, 30, 12, 34, 56, 789, time.UTC)
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Type() {
		case reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(at))
			return
		case reflect.TypeFor[json.RawMessage]():
			v.SetBytes([]byte(`{}`))
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString("x-" + v.Type().Name())
		case reflect.Int, reflect.Int64:
			v.SetInt(-7)
		case reflect.Uint64, reflect.Uint8:
			v.SetUint(1 << (v.Type().Bits() - 1))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Float64:
			v.SetFloat(1.5)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					fill(v.Field(i))
				}
			}
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k)
			fill(e)
			m.SetMapIndex(k, e)
			v.Set(m)
		case reflect.Slice:
			s := reflect.MakeSlice(v.Type(), 1, 1)
			fill(s.Index(0))
			v.Set(s)
		default:
			t.Fatalf("fullRecord: a field of kind %s (%s)", v.Kind(), v.Type())
		}
	}
	var r instRecord
	fill(reflect.ValueOf(&r).Elem())
	// encoding/json's: documents, failures and search attributes; not in
	// the JSON: the state, the inbox's flag.
	r.Input, r.Output, r.Vars, r.Error, r.Search = nil, nil, nil, nil, nil
	r.State, r.InboxWaiting = nil, false
	r.Version, r.Priority = 3, 0 // a negative version is not written; 0 is left out
	return &r
}

// TestDecodeMeta: the fast path reads a record of every field it knows (a
// field added to the instance and not to it fails here), and gives up on
// what it leaves to encoding/json, which then reads it; both agree.
func TestDecodeMeta(t *testing.T) {
	t.Parallel()
	full := fullRecord(t)
	m, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var fast instRecord
	if !metaFast(m, &fast) {
		t.Fatalf("the fast path gave up on a record of every field it should read:\n%s", m)
	}
	var want instRecord
	if err := json.Unmarshal(m, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&fast, &want) {
		t.Fatalf("the fast path read\n%+v\nencoding/json\n%+v", fast, want)
	}
	for name, rec := range map[string]func(r *instRecord){
		"a failure": func(r *instRecord) { r.Error = &weft.Failure{Code: "c", Details: json.RawMessage(`{"a":[1]}`)} },
		"search attributes": func(r *instRecord) {
			r.Search = weft.SearchAttributes{"k": {Type: weft.SearchKeywords, Keywords: []string{"a"}}}
		},
		"an escape": func(r *instRecord) { r.Workflow = "a\"b" },
		"non-ASCII": func(r *instRecord) { r.ID = "é" },
		"documents": func(r *instRecord) { r.Input = json.RawMessage(`{"a":1}`) },
	} {
		r := *full
		rec(&r)
		m, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var fast instRecord
		if metaFast(m, &fast) {
			t.Errorf("%s: the fast path read %s", name, m)
		}
		var got, want instRecord
		if err := decodeMeta(m, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(m, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, &want) {
			t.Errorf("%s: decodeMeta read\n%+v\nencoding/json\n%+v", name, got, want)
		}
	}
}

// FuzzDecodeMeta: whatever the fast path reads, encoding/json reads the
// same (and does not refuse).
func FuzzDecodeMeta(f *testing.F) {
	full := fullRecord(f)
	m, err := json.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m)
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	for _, r := range []instRecord{
		{Instance: weft.Instance{ID: "i1", Workflow: "w", Version: 1, Status: weft.StatusRunning, CreatedAt: at, UpdatedAt: at, Rev: 1,
			Plugins: map[string]string{"kit": "1.0.0"}, Trace: &weft.Trace{Span: "00f067aa0ba902b7"}}, HistSeq: 3, Stateless: true},
		{Instance: weft.Instance{ID: "i2", Status: weft.StatusCompleted, Plugins: map[string]string{}, Lease: weft.Lease{Node: "n", Boot: "b", Expiry: at}}},
	} {
		m, err := json.Marshal(&r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m)
	}
	f.Add([]byte(`{"id":"a","id":"b"}`))
	f.Add([]byte(`{"version":1e2,"rev":-1,"fence":01}`))
	f.Add([]byte(`{"ID":"a","lease":{"expiry":"2026-11-30T07:00:00+01:00"}} `))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast instRecord
		if !metaFast(b, &fast) {
			return
		}
		var want instRecord
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("the fast path read %q, which encoding/json refuses: %v", b, err)
		}
		if !reflect.DeepEqual(&fast, &want) {
			t.Fatalf("%q: the fast path read\n%+v\nencoding/json\n%+v", b, fast, want)
		}
	})
}

// TestEncodeMeta: a record's JSON is json.Marshal's, byte for byte, for a
// record of every field (written field by field) and for those left to
// encoding/json.
func TestEncodeMeta(t *testing.T) {
	t.Parallel()
	full := fullRecord(t)
	withParentOrder := *full
	withParentOrder.Parent = &weft.ParentRef{InstanceID: "p", StepID: "s", Order: weft.Order{FairnessWeight: 2}}
	bare := instRecord{Instance: weft.Instance{ID: "i<&>\u2028", Plugins: map[string]string{"b": "2", "a": "1", "é": "<"}}}
	for name, r := range map[string]*instRecord{
		"every field":          full,
		"a parent's order":     &withParentOrder,
		"escapes, zero fields": &bare,
		"a failure":            {Instance: weft.Instance{ID: "f", Error: &weft.Failure{Code: "c"}}},
		"search attributes":    {Instance: weft.Instance{ID: "s", Search: weft.SearchAttributes{"n": {Type: weft.SearchNumber, Number: 1}}}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMeta(r)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: encodeMeta = %s, %v; json.Marshal wrote %s", name, got, err, want)
		}
	}
	if _, ok := appendMeta(nil, full); !ok {
		t.Error("a record of every field was left to encoding/json")
	}
}

// FuzzEncodeMeta: whatever record encoding/json reads, encodeMeta writes
// the bytes json.Marshal writes.
func FuzzEncodeMeta(f *testing.F) {
	m, err := json.Marshal(fullRecord(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m)
	f.Add([]byte(`{"id":"a","parent":{"instance_id":"p","step_id":"s","order":{"priority":-1}},"lease":{"boot":"b"},"plugins":{}}`))
	f.Add([]byte(`{"created_at":"2026-11-30T07:00:00.5+01:00","hold":{"since":"0001-01-01T00:00:00Z"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r instRecord
		if json.Unmarshal(b, &r) != nil {
			return
		}
		r.Input, r.Output, r.Vars = nil, nil, nil
		want, werr := json.Marshal(&r)
		got, err := encodeMeta(&r)
		if (err != nil) != (werr != nil) || string(got) != string(want) {
			t.Fatalf("%q: encodeMeta = %s, %v; json.Marshal wrote %s, %v", b, got, err, want, werr)
		}
	})
}

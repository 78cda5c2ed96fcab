package jsonv_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/jsonv"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in, bytes string
		err             bool
	}{
		{name: "object kept byte for byte", in: `{"b":1, "a":[1.0,1E2,-0]}`, bytes: `{"b":1, "a":[1.0,1E2,-0]}`},
		{name: "surrounding whitespace trimmed", in: " \n\t\"x\" \n", bytes: `"x"`},
		{name: "escapes kept", in: `"\u00e9 \/ \u2028"`, bytes: `"\u00e9 \/ \u2028"`},
		{name: "duplicate names allowed", in: `{"a":1,"a":2}`, bytes: `{"a":1,"a":2}`},
		{name: "beyond float64", in: `1e400`, bytes: `1e400`},
		{name: "not UTF-8 replaced", in: "\"a\xffb\"", bytes: "\"a\uFFFDb\""},
		{name: "empty", in: ``, err: true},
		{name: "two documents", in: `1 2`, err: true},
		{name: "truncated", in: `{"a":`, err: true},
		{name: "trailing comma", in: `[1,]`, err: true},
		{name: "bare word", in: `nope`, err: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := jsonv.New([]byte(tt.in))
			if tt.err {
				if !errors.Is(err, jsonv.ErrInvalid) {
					t.Fatalf("New(%q) = %v, want ErrInvalid", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.in, err)
			}
			if string(d.Bytes()) != tt.bytes || d.Len() != len(tt.bytes) {
				t.Errorf("New(%q).Bytes() = %q, want %q", tt.in, d.Bytes(), tt.bytes)
			}
		})
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	d := jsonv.Trusted([]byte(`{"n":1.5,"l":[true,null,"x"]}`))
	v, err := d.Value()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": 1.5, "l": []any{true, nil, "x"}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Value() = %#v, want %#v", v, want)
	}
	again, _ := d.Value()
	if reflect.ValueOf(again).Pointer() != reflect.ValueOf(v).Pointer() {
		t.Error("Value decoded twice: want the first decoding shared")
	}
	if _, err := jsonv.Trusted([]byte(`{"n":1e400}`)).Value(); err == nil || !strings.Contains(err.Error(), "1e400") {
		t.Errorf("Value of 1e400: %v, want an error naming the number", err)
	}
	if x, err := jsonv.Plain(42); x != 42 || err != nil {
		t.Errorf("Plain(42) = %v, %v", x, err)
	}
}

func TestEncode(t *testing.T) {
	t.Parallel()
	doc := jsonv.Trusted([]byte(`{"z":1e400, "html":"<&>"}`))
	m := map[string]any{"b": doc, "a": "<x>", "c": []any{1.0, nil}, "é\"": true}
	got, err := jsonv.EncodeMap(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"<x>","b":{"z":1e400, "html":"<&>"},"c":[1,null],"é\"":true}`
	if string(got) != want {
		t.Errorf("EncodeMap = %s, want %s", got, want)
	}
	if got, _ := jsonv.EncodeMap(nil); string(got) != "null" {
		t.Errorf("EncodeMap(nil) = %s, want null", got)
	}
	if got, _ := jsonv.EncodeList([]any{doc, 2.5}); string(got) != `[{"z":1e400, "html":"<&>"},2.5]` {
		t.Errorf("EncodeList = %s", got)
	}
	if n, _ := jsonv.Len(doc); n != doc.Len() {
		t.Errorf("Len(doc) = %d, want %d", n, doc.Len())
	}
	if n, _ := jsonv.Len(map[string]any{"a": 1}); n != len(`{"a":1}`) {
		t.Errorf("Len(map) = %d", n)
	}
	if _, err := jsonv.Encode(make(chan int)); err == nil {
		t.Error("Encode(chan) succeeded")
	}
}

func TestAppendFields(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		obj    string
		fields []jsonv.Field
		want   string
		err    bool
	}{
		{obj: `{"a":1}`, fields: []jsonv.Field{{Name: "b", Value: []byte(`[1]`)}, {Name: "c"}, {Name: "d\n", Value: []byte(`null`)}}, want: `{"a":1,"b":[1],"d\n":null}`},
		{obj: `{}`, fields: []jsonv.Field{{Name: "b", Value: []byte(`2`)}}, want: `{"b":2}`},
		{obj: "{ }\n", fields: []jsonv.Field{{Name: "b", Value: []byte(`2`)}, {Name: "c", Value: []byte(`3`)}}, want: `{ "b":2,"c":3}`},
		{obj: `{"a":1}`, want: `{"a":1}`},
		{obj: `[1]`, err: true},
		{obj: ``, err: true},
	} {
		got, err := jsonv.AppendFields([]byte(tt.obj), tt.fields...)
		if tt.err {
			if err == nil {
				t.Errorf("AppendFields(%q) = %s, want an error", tt.obj, got)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("AppendFields(%q) = %s, %v; want %s", tt.obj, got, err, tt.want)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("AppendFields(%q) = %s: not JSON", tt.obj, got)
		}
	}
}

// FuzzNew: New never panics, accepts exactly what is one JSON document once
// made UTF-8, keeps it byte for byte but for surrounding whitespace, and a
// Doc it accepts splices into a document that is valid JSON.
func FuzzNew(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2]`, `"x"`, `1e400`, "\"a\xffb\"", ` null `, `{"a":1,"a":2}`, `{`, `1 2`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := jsonv.New(raw)
		valid := json.Valid(jsonv.UTF8(raw))
		if (err == nil) != valid {
			t.Fatalf("New(%q): %v; encoding/json says valid %v", raw, err, valid)
		}
		if err != nil {
			return
		}
		obj, err := jsonv.AppendFields([]byte(`{"k":1}`), jsonv.Field{Name: "d", Value: d.Bytes()})
		if err != nil || !json.Valid(obj) {
			t.Fatalf("spliced %q: %s, %v", raw, obj, err)
		}
		m, err := jsonv.EncodeMap(map[string]any{"d": d})
		if err != nil || !json.Valid(m) {
			t.Fatalf("EncodeMap of %q: %s, %v", raw, m, err)
		}
	})
}

// TestEncodeRaw: a json.RawMessage is copied as it is, nil as null.
func TestEncodeRaw(t *testing.T) {
	t.Parallel()
	got, err := jsonv.EncodeMap(map[string]any{"r": json.RawMessage(`{"a":"<"}`), "n": json.RawMessage(nil)})
	if err != nil || string(got) != `{"n":null,"r":{"a":"<"}}` {
		t.Errorf("EncodeMap = %s, %v", got, err)
	}
}

func TestCompact(t *testing.T) {
	t.Parallel()
	got, err := jsonv.Compact([]byte(" { \"a\" : [ 1 , \"x y\\u00e9\" ] }\n"))
	if err != nil || string(got) != `{"a":[1,"x y\u00e9"]}` {
		t.Errorf("Compact = %s, %v", got, err)
	}
	if _, err := jsonv.Compact([]byte(`{"a":`)); !errors.Is(err, jsonv.ErrInvalid) {
		t.Errorf("Compact of a truncated document: %v, want ErrInvalid", err)
	}
}

func TestMember(t *testing.T) {
	t.Parallel()
	d := jsonv.Trusted([]byte(`{"a":{"b":[1, 2.50]},"s":"x\"y","n":1e400,"dup":1,"dup":2, "esc\u0061ped": true}`))
	for _, tt := range []struct {
		name, want    string
		found, object bool
	}{
		{name: "a", want: `{"b":[1, 2.50]}`, found: true, object: true},
		{name: "s", want: `"x\"y"`, found: true, object: true},
		{name: "n", want: `1e400`, found: true, object: true},
		{name: "dup", want: `2`, found: true, object: true},
		{name: "escaped", want: `true`, found: true, object: true},
		{name: "missing", object: true},
	} {
		m, found, object, err := d.Member(tt.name)
		if err != nil || found != tt.found || object != tt.object || (found && string(m.Bytes()) != tt.want) {
			t.Errorf("Member(%q) = %v, %v, %v, %v; want %s, %v, %v", tt.name, m, found, object, err, tt.want, tt.found, tt.object)
		}
	}
	for _, raw := range []string{`null`, `[1]`, `"s"`, `3`} {
		if _, found, object, err := jsonv.Trusted([]byte(raw)).Member("a"); found || object || err != nil {
			t.Errorf("Member of %s = %v, %v, %v; want not an object", raw, found, object, err)
		}
	}
}

// TestEncodeScalars: the values Encode writes without an encoder come out
// as encoding/json (without HTML escaping) writes them.
func TestEncodeScalars(t *testing.T) {
	t.Parallel()
	for _, x := range []any{"", "step-a", "a<b>&c", "é", "\u2028", "quote\"", "tab\t", 0, -7, 1 << 40, true, false, nil} {
		got, err := jsonv.Encode(x)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", x, err)
		}
		want, err := jsonv.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Encode(%#v) = %s, want %s", x, got, want)
		}
	}
}

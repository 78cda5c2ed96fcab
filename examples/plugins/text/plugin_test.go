package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// TestText runs every test of the plugin against one Runtime: wazero
// compiles the module once, which takes seconds under the race detector.
func TestText(t *testing.T) {
	t.Parallel()
	p := load(t)
	for _, tt := range []struct {
		name string
		test func(*testing.T, plugin)
	}{
		{"Slugify", testSlugify},
		{"Wordcount", testWordcount},
		{"Template", testTemplate},
		{"Failures", testFailures},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, p)
		})
	}
}

// plugin is the text plugin loaded into a Runtime.
type plugin struct {
	rt      *plugins.Runtime
	version string
}

// load returns the text plugin in a Runtime over a blob store in a
// temporary directory, closed when the test ends.
func load(t *testing.T) plugin {
	t.Helper()
	rt := testplugins.Runtime(t, plugins.Config{})
	return plugin{rt: rt, version: testplugins.Load(t, rt, "text")}
}

// call invokes activity with input and fails the test on an error.
func (p plugin) call(t *testing.T, activity, input string) string {
	t.Helper()
	out, err := p.rt.Invoke(context.Background(), p.version, call.Call{Activity: activity, Input: []byte(input)})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func testSlugify(t *testing.T, p plugin) {
	tests := []struct {
		text string
		want string
	}{
		{text: "Hello, World!", want: "hello-world"},
		{text: "  Crème brûlée \t à la carte  ", want: "creme-brulee-a-la-carte"},
		{text: "Go 1.26 release notes", want: "go-1-26-release-notes"},
		{text: "ÅNGSTRÖM_ÆON", want: "angstrom-æon"},
		{text: "Привет, мир", want: "привет-мир"},
		{text: "한국어 텍스트", want: "한국어-텍스트"},
		{text: "हिन्दी", want: "हिन्दी"},
		{text: "🚀 launch 🚀", want: "launch"},
		{text: "---", want: ""},
		{text: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			in, _ := json.Marshal(map[string]string{"text": tt.text})
			var out struct{ Slug string }
			if err := json.Unmarshal([]byte(p.call(t, "slugify", string(in))), &out); err != nil {
				t.Fatal(err)
			}
			if out.Slug != tt.want {
				t.Errorf("slug %q, want %q", out.Slug, tt.want)
			}
		})
	}
}

func testWordcount(t *testing.T, p plugin) {
	tests := []struct {
		name string
		text string
		want string
	}{
		{name: "empty", text: "", want: `{"words":0,"lines":0,"chars":0,"top":[]}`},
		{name: "one line", text: "the cat and the hat", want: `{"words":5,"lines":1,"chars":19,"top":[{"word":"the","count":2},{"word":"and","count":1},{"word":"cat","count":1},{"word":"hat","count":1}]}`},
		{name: "punctuation and case", text: "The end. THE END!\n— fin —\n", want: `{"words":5,"lines":2,"chars":26,"top":[{"word":"end","count":2},{"word":"the","count":2},{"word":"fin","count":1}]}`},
		{name: "last line without newline", text: "a\n\nb", want: `{"words":2,"lines":3,"chars":4,"top":[{"word":"a","count":1},{"word":"b","count":1}]}`},
		{name: "runes not bytes", text: "naïve café", want: `{"words":2,"lines":1,"chars":10,"top":[{"word":"café","count":1},{"word":"naïve","count":1}]}`},
		{
			name: "top ten",
			text: strings.Repeat("k ", 12) + strings.Repeat("j ", 11) + "a b c d e f g h i l m",
			want: `{"words":34,"lines":1,"chars":67,"top":[{"word":"k","count":12},{"word":"j","count":11},{"word":"a","count":1},{"word":"b","count":1},{"word":"c","count":1},{"word":"d","count":1},{"word":"e","count":1},{"word":"f","count":1},{"word":"g","count":1},{"word":"h","count":1}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, _ := json.Marshal(map[string]string{"text": tt.text})
			if out := p.call(t, "wordcount", string(in)); out != tt.want {
				t.Errorf("output %s\nwant %s", out, tt.want)
			}
		})
	}
}

func testTemplate(t *testing.T, p plugin) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{name: "key", input: `{"template":"Hello {{.name}}!","data":{"name":"Ada"}}`, want: "Hello Ada!"},
		{name: "spaces and lines", input: `{"template":"Dear {{ .user.name }},\n\nyour order {{.order}} ships {{.when}}.","data":{"user":{"name":"Ada"},"order":"A-17","when":"today"}}`, want: "Dear Ada,\n\nyour order A-17 ships today."},
		{name: "numbers print as written", input: `{"template":"{{.n}} / {{.f}} / {{.big}}","data":{"n":1000000,"f":2.5,"big":1e300}}`, want: "1000000 / 2.5 / 1e+300"},
		{name: "other values print as Go does", input: `{"template":"{{.b}} {{.null}} {{.list}} {{.obj}}","data":{"b":true,"null":null,"list":[1,"x"],"obj":{"k":"v"}}}`, want: "true <no value> [1 x] map[k:v]"},
		{name: "the whole data", input: `{"template":"<{{.}}>","data":"just this"}`, want: "<just this>"},
		{name: "unicode keys", input: `{"template":"{{.prénom}}","data":{"prénom":"Zoé"}}`, want: "Zoé"},
		{name: "no placeholders, no data", input: `{"template":"static }} text"}`, want: "static }} text"},
		{name: "conditions and loops", input: `{"template":"{{if .vip}}VIP {{end}}{{range $i, $x := .items}}{{if $i}}, {{end}}{{$x.qty}}×{{$x.sku}}{{end}}","data":{"vip":true,"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}]}}`, want: "VIP 2×a, 1×b"},
		{name: "functions", input: `{"template":"{{len .items}} items, first {{index .items 0 | printf \"%q\"}}","data":{"items":["x","y"]}}`, want: `2 items, first "x"`},
		{name: "empty", input: `{}`, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal([]byte(p.call(t, "template", tt.input)), &out); err != nil || out.Text == nil {
				t.Fatalf("output: %v, want {text}", err)
			}
			if *out.Text != tt.want {
				t.Errorf("text %q, want %q", *out.Text, tt.want)
			}
		})
	}
}

func testFailures(t *testing.T, p plugin) {
	tests := []struct {
		name     string
		activity string
		input    string
		wantCode string
		// wantMessage is part of the message that says what was wrong.
		wantMessage string
	}{
		{name: "unclosed placeholder", activity: "template", input: `{"template":"Hello\n  {{.name"}`, wantCode: "bad_template", wantMessage: "template:2: unclosed action"},
		{name: "missing key", activity: "template", input: `{"template":"Hello {{.nmae}}","data":{"name":"Ada"}}`, wantCode: "bad_template", wantMessage: `template:1:8: executing "template" at <.nmae>: map has no entry for key "nmae"`},
		{name: "no data", activity: "template", input: `{"template":"{{.name}}"}`, wantCode: "bad_template", wantMessage: `nil data; no entry for key "name"`},
		{name: "key of an array", activity: "template", input: `{"template":"{{.items.first}}","data":{"items":[1]}}`, wantCode: "bad_template", wantMessage: `can't evaluate field first`},
		{name: "unknown function", activity: "template", input: `{"template":"{{shout .x}}","data":{"x":1}}`, wantCode: "bad_template", wantMessage: `function "shout" not defined`},
		{name: "empty key", activity: "template", input: `{"template":"{{.a..b}}","data":{}}`, wantCode: "bad_template", wantMessage: "unexpected <.> in operand"},
		{name: "text too long", activity: "template", input: `{"template":"` + strings.Repeat("{{.}}", 100) + `","data":"` + strings.Repeat("x", 8000) + `"}`, wantCode: "bad_template", wantMessage: "longer than"},
		{name: "template not a string", activity: "template", input: `{"template":5}`, wantCode: "bad_input", wantMessage: "template"},
		{name: "text not a string", activity: "wordcount", input: `{"text":["a"]}`, wantCode: "bad_input", wantMessage: "text"},
		{name: "input not an object", activity: "slugify", input: `"Hello"`, wantCode: "bad_input", wantMessage: "decoding input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.rt.Invoke(context.Background(), p.version, call.Call{Activity: tt.activity, Input: []byte(tt.input)})
			var ge *call.GuestError
			if !errors.As(err, &ge) {
				t.Fatalf("error %v, want a *GuestError", err)
			}
			if ge.Code != tt.wantCode || ge.Retryable || !strings.Contains(ge.Message, tt.wantMessage) {
				t.Errorf("got %+v, want non-retryable %s with a message containing %q", ge, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

// Command text is a Weft plugin of small text activities.
//
// Activities:
//
//   - slugify: {"text"} -> {"slug"}
//   - wordcount: {"text"} -> {"words", "lines", "chars", "top": [{"word", "count"}]}
//   - template: {"template": "Hello {{.name}}", "data"} -> {"text"}
//
// See README.md beside this file. Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o text.wasm .
//	tinygo build -target=wasip1 -buildmode=c-shared -o text.wasm .
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/sdk"
)

func init() {
	sdk.RegisterWithDescription("slugify", `{"text"} -> {"slug"}: lower case, accents dropped, words joined by hyphens.`, sdk.Typed(slugify))
	sdk.RegisterWithDescription("wordcount", `{"text"} -> {"words", "lines", "chars", "top"}: counts, and the ten most frequent words.`, sdk.Typed(wordcount))
	sdk.RegisterWithDescription("template", `{"template", "data"} -> {"text"}: executes a Go text/template on JSON data.`, sdk.Typed(render))
}

func main() {}

type textIn struct {
	Text string `json:"text"`
}

type slugOut struct {
	Slug string `json:"slug"`
}

// slugify lower-cases the letters and digits of text, drops the accents of
// Latin letters ("Crème" -> "creme"), and joins the runs with hyphens.
// Letters of other scripts are kept as they are: a slug of "Привет" is
// "привет".
func slugify(_ *sdk.Context, in textIn) (slugOut, error) {
	// NFD splits "è" into "e" and a combining grave accent.
	var b strings.Builder
	gap, afterLatin := false, false
	for _, r := range norm.NFD.String(in.Text) {
		switch {
		case unicode.IsMark(r):
			// A mark belongs to the letter before it. Accents on Latin
			// letters go; other scripts need theirs (the vowel signs of
			// Devanagari, say).
			inWord := b.Len() > 0 && !gap
			if inWord && !(afterLatin && unicode.Is(unicode.Mn, r)) {
				b.WriteRune(r)
			}
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if gap && b.Len() > 0 {
				b.WriteByte('-')
			}
			gap, afterLatin = false, unicode.Is(unicode.Latin, r)
			b.WriteRune(unicode.ToLower(r))
		default:
			gap = true
		}
	}
	// NFC puts back together what NFD split and the loop kept (Hangul
	// syllables, for one).
	return slugOut{Slug: norm.NFC.String(b.String())}, nil
}

type countOut struct {
	// Words counts the words: the runs of text between white space,
	// without the punctuation and symbols at their ends ("end." is "end";
	// "—" is no word).
	Words int `json:"words"`
	// Lines counts the lines; a last line without a newline counts too.
	Lines int `json:"lines"`
	// Chars counts Unicode code points.
	Chars int `json:"chars"`
	// Top lists the ten most frequent words, lower-cased, most frequent
	// first and alphabetically among equals.
	Top []wordCount `json:"top"`
}

type wordCount struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

const topWords = 10

func wordcount(_ *sdk.Context, in textIn) (countOut, error) {
	out := countOut{Chars: utf8.RuneCountInString(in.Text), Top: []wordCount{}}
	if in.Text != "" {
		out.Lines = strings.Count(in.Text, "\n")
		if !strings.HasSuffix(in.Text, "\n") {
			out.Lines++
		}
	}
	counts := map[string]int{}
	for _, f := range strings.Fields(in.Text) {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if w == "" {
			continue
		}
		out.Words++
		counts[strings.ToLower(w)]++
	}
	for w, n := range counts {
		out.Top = append(out.Top, wordCount{Word: w, Count: n})
	}
	sort.Slice(out.Top, func(i, j int) bool {
		a, b := out.Top[i], out.Top[j]
		return a.Count > b.Count || a.Count == b.Count && a.Word < b.Word
	})
	if len(out.Top) > topWords {
		out.Top = out.Top[:topWords]
	}
	return out, nil
}

// codeBadTemplate is the failure of a template that does not render with
// its data. It is non-retryable: the same input fails the same way.
const codeBadTemplate = "bad_template"

// maxRendered bounds the rendered text, well under the host's default
// output limit of 1 MiB.
const maxRendered = 512 << 10

type templateIn struct {
	// Template is Go text/template source.
	Template string `json:"template"`
	// Data is any JSON document; {{.}} is all of it.
	Data json.RawMessage `json:"data"`
}

type templateOut struct {
	Text string `json:"text"`
}

// render executes the template, Go's text/template with missingkey=error,
// on the data. A key the data lacks fails the call rather than print
// nothing, so that a misspelt name is noticed; a template whose text would
// pass maxRendered fails too, however it got there (a range over a large
// array, say).
func render(_ *sdk.Context, in templateIn) (templateOut, error) {
	data, err := decodeData(in.Data)
	if err != nil {
		return templateOut{}, err
	}
	t, err := template.New("template").Option("missingkey=error").Parse(in.Template)
	if err != nil {
		return templateOut{}, sdk.NonRetryable(codeBadTemplate, err.Error())
	}
	w := &limitWriter{max: maxRendered}
	if err := t.Execute(w, data); err != nil {
		if errors.Is(err, errTooLong) {
			return templateOut{}, sdk.NonRetryable(codeBadTemplate, fmt.Sprintf("the text is longer than %d bytes", maxRendered))
		}
		return templateOut{}, sdk.NonRetryable(codeBadTemplate, err.Error())
	}
	return templateOut{Text: w.b.String()}, nil
}

var errTooLong = errors.New("text too long")

// limitWriter keeps at most max bytes and fails the write that would pass
// them, which stops the template's execution.
type limitWriter struct {
	b   strings.Builder
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, errTooLong
	}
	return w.b.Write(p)
}

// decodeData decodes the template's data. Numbers become int64 when they
// are integers that fit and float64 otherwise, so that 1000000 prints as
// 1000000, not 1e+06.
func decodeData(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		// The SDK has already checked that the input is JSON.
		return nil, sdk.NonRetryable(abi.CodeBadInput, "decoding data: "+err.Error())
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	}
	return v
}

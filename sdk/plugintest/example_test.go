package plugintest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weftworks/weft/sdk/plugintest"
)

// Builds the example plugin text (examples/plugins/text) and calls its
// slugify activity in the host's sandbox, once with an input and once
// without one. In a test, t is the test's *testing.T.
func Example() {
	t := newExampleT()
	defer t.cleanup()

	p := plugintest.Build(t, filepath.Join(repo, "examples", "plugins", "text"))
	res := p.Call(t, "slugify", plugintest.Call{Input: map[string]string{"text": "Crème Brûlée, 2 pieces"}})
	var out struct{ Slug string }
	res.Decode(t, &out)
	fmt.Println(out.Slug)

	f := p.Call(t, "slugify", plugintest.Call{Input: []byte(`[1, 2]`)}).Failed(t)
	fmt.Printf("%s failure %s, retryable %t\n", f.Kind, f.Code, f.Retryable)
	// Output:
	// creme-brulee-2-pieces
	// activity failure bad_input, retryable false
}

// exampleT stands in, in an Example, for the *testing.T that a test passes
// to plugintest. It has the methods plugintest calls; the embedded
// testing.TB, nil, only completes the interface, so that a method
// plugintest starts calling panics here until it is added. A failure
// panics, which fails the Example with the message.
type exampleT struct {
	testing.TB
	dir string
}

func newExampleT() *exampleT {
	dir, err := os.MkdirTemp("", "plugintest-example-*")
	if err != nil {
		panic(err)
	}
	return &exampleT{dir: dir}
}

func (e *exampleT) cleanup() { os.RemoveAll(e.dir) }

func (*exampleT) Helper()                           {}
func (e *exampleT) TempDir() string                 { return e.dir }
func (*exampleT) Context() context.Context          { return context.Background() }
func (*exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (*exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

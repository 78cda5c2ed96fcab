package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/weftworks/weft/internal/testplugins"
)

// screenshots makes the browser tests write their screenshots to
// docs/console/*.png, where the README shows them, instead of a temporary
// directory: go test ./host/console -run TestBrowser -screenshots
var screenshots = flag.Bool("screenshots", false, "write the browser tests' screenshots to docs/console/*.png instead of a temporary directory")

// The browser's viewport, and so the size of the screenshots, unless a
// test sizes it otherwise (tab.viewport).
const viewW, viewH = 1280, 800

// waitLimit bounds every wait on the page: generous, for a loaded
// two-core machine running the race detector.
const waitLimit = time.Minute

// chromium finds the browser, or fails the test: CI installs it, so a
// machine without it is set up wrong, not a reason to skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: the console's browser tests need it; run `make deps` (scripts/deps.sh installs Debian's chromium)")
	return ""
}

// tab is one headless chromium, with one tab, on a test host. It records
// every JavaScript error the page logs and every exception it does not
// catch, and fails the test on any; it accepts every confirm() dialog,
// recording its message.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string // the host's URL
	w, h int64  // the viewport's size

	mu      sync.Mutex
	jsErrs  []string
	dialogs []string
}

// openTab starts chromium (headless, no sandbox, as root in a container
// needs; a fixed viewport; a fresh profile) on the host at base.
func openTab(t *testing.T, base string) *tab {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.WindowSize(viewW, viewH),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb := &tab{t: t, ctx: ctx, base: base}
	t.Cleanup(func() {
		cancel()
		acancel()
	})
	// Listen starts the browser (with no deadline: the browser lives as
	// long as ctx) and sees each event before the reply to any command
	// sent after it, so an error is recorded by the time a later
	// action returns.
	err := chromedp.Listen(ctx, func(ev any) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			tb.jsErrs = append(tb.jsErrs, "uncaught: "+exceptionText(ev.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					if a.Description != "" {
						args = append(args, a.Description)
					} else {
						args = append(args, string(a.Value))
					}
				}
				tb.jsErrs = append(tb.jsErrs, "console."+string(ev.Type)+": "+strings.Join(args, " "))
			}
		}
	})
	if err != nil {
		t.Fatalf("starting chromium (%s): %v", exe, err)
	}
	// A confirm() blocks the page, and so the click that opened it, until
	// it is answered: answer from another goroutine.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	tb.viewport(viewW, viewH)
	// Registered after the browser's cleanup, so it runs before it.
	t.Cleanup(tb.checkErrors)
	return tb
}

// viewport sizes the page's viewport, as a phone's or a desktop's
// window, and so the screenshots taken after.
func (tb *tab) viewport(w, h int64) {
	tb.t.Helper()
	tb.do(chromedp.EmulateViewport(w, h))
	tb.w, tb.h = w, h
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "?"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

// checkErrors fails the test on any JavaScript error the page logged.
func (tb *tab) checkErrors() {
	tb.t.Helper()
	// A round trip, so every event sent before it has been seen.
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[int]("1"))
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, e := range tb.jsErrs {
		tb.t.Errorf("the page logged a JavaScript error: %s", e)
	}
}

// dialogsSeen answers the messages of the dialogs the page opened.
func (tb *tab) dialogsSeen() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.dialogs...)
}

// do runs actions, each within waitLimit, and fails the test on an error.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("in the browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting it when it
// is a promise) and decodes its value as JSON into a T.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := tryEval[T](tb, expr)
	if err != nil {
		tb.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func tryEval[T any](tb *tab, expr string) (T, error) {
	var v T
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decoding %s: %w", raw, err)
	}
	return v, nil
}

// waitFor evaluates expr until ok accepts its value, for up to waitLimit,
// and answers that value; it fails the test with what, and the last value
// seen, when the time runs out. Evaluating from here rather than waiting
// inside the page also keeps an otherwise idle headless tab delivering
// its network answers.
func waitFor[T any](tb *tab, what, expr string, ok func(T) bool) T {
	tb.t.Helper()
	v, err := poll(tb, expr, ok)
	if err != nil {
		tb.t.Fatalf("waited %v for %s: %v", waitLimit, what, err)
	}
	return v
}

// poll is waitFor answering an error, not failing the test, when the time
// runs out.
func poll[T any](tb *tab, expr string, ok func(T) bool) (T, error) {
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := tryEval[T](tb, expr)
		if err == nil && ok(v) {
			return v, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return v, fmt.Errorf("the last evaluation of %s failed: %w", expr, err)
			}
			return v, fmt.Errorf("%s is %+v", expr, v)
		}
		<-tick.C // polling under the deadline above
	}
}

// waitTrue waits for a JavaScript condition to hold.
func waitTrue(tb *tab, what, cond string) {
	tb.t.Helper()
	waitFor(tb, what, "Boolean("+cond+")", func(b bool) bool { return b })
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// q is document.querySelector(sel).
func q(sel string) string { return "document.querySelector(" + js(sel) + ")" }

// open loads the console at route ("/instances") and, when the host asks
// for a token, enters token in the console's dialog; it waits until the
// console shows the token's role.
func (tb *tab) open(route, token, role string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(tb.base + "/#" + route))
	waitTrue(tb, "the token dialog", q("[data-test=token-dialog]")+"?.open")
	tb.do(
		chromedp.SendKeys(chromedp.CSS("[data-test=token-input]"), token),
		chromedp.Click(chromedp.CSS("[data-test=token-submit]")),
	)
	waitFor(tb, "the console to show the token's role", q("[data-test=whoami] .badge")+"?.textContent ?? ''",
		func(s string) bool { return s == role })
	waitTrue(tb, "the dialog to close", "!"+q("[data-test=token-dialog]")+".open")
	if got := eval[string](tb, "sessionStorage.getItem('weft.token')"); got != token {
		tb.t.Fatalf("sessionStorage holds token %q, want the one entered", got)
	}
}

// goTo moves the console to route by its fragment, as a link does (the
// page is not reloaded).
func (tb *tab) goTo(route string) {
	tb.t.Helper()
	tb.do(chromedp.Evaluate[chromedp.Void]("location.hash = " + js("#"+route)))
}

// click clicks the first element sel matches, once it is visible.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		// The page redraws parts of itself as it polls the host: a node
		// replaced between being found and being clicked is found again.
		// (Chrome's words: "Could not find node with given id".)
		if !strings.Contains(err.Error(), "node with given id") || ctx.Err() != nil {
			tb.t.Fatalf("in the browser: clicking %s: %v", sel, err)
		}
	}
}

// screenshot captures the viewport, scrolled to the top, as a PNG named
// name.png: into a temporary directory, or with -screenshots into
// docs/console for the README. It checks the image is a PNG of the
// viewport's size.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	tb.screenshotAt(name, "")
}

// screenshotAt is screenshot with the page scrolled to show the element
// sel matches at the top (none: the top of the page).
func (tb *tab) screenshotAt(name, sel string) {
	tb.t.Helper()
	scroll := "window.scrollTo(0, 0)"
	if sel != "" {
		scroll = q(sel) + ".scrollIntoView({block: 'start'})"
	}
	tb.do(
		// Nothing focused or hovered: the pictures show the page at rest.
		chromedp.Evaluate[chromedp.Void]("document.activeElement?.blur(); "+scroll),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 0, 0))
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil {
		tb.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if int64(cfg.Width) != tb.w || int64(cfg.Height) != tb.h {
		tb.t.Errorf("screenshot %s is %dx%d, want %dx%d", name, cfg.Width, cfg.Height, tb.w, tb.h)
	}
	dir := tb.t.TempDir()
	if *screenshots {
		dir = filepath.Join(testplugins.Root(tb.t), "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// TestBrowserHarnessSeesJavaScriptErrors: what fails the other browser
// tests on a JavaScript error does see one: an exception nothing catches,
// an unhandled promise rejection and a console.error call in the page are
// each recorded.
func TestBrowserHarnessSeesJavaScriptErrors(t *testing.T) {
	h := newHost(t)
	tb := openTab(t, h.url)
	tb.open("/events", readerSecret, "reader")
	tb.do(chromedp.Evaluate[chromedp.Void](`setTimeout(() => { throw new Error('thrown-by-test'); }, 0);
		Promise.reject(new Error('rejected-by-test'));
		console.error('logged-by-test')`))
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		tb.mu.Lock()
		seen := strings.Join(tb.jsErrs, "\n")
		done := strings.Contains(seen, "thrown-by-test") && strings.Contains(seen, "rejected-by-test") && strings.Contains(seen, "logged-by-test")
		if done {
			tb.jsErrs = nil // expected: not a failure of this test
		}
		tb.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the harness recorded %q; want the exception, the rejection and the console.error", waitLimit, seen)
		}
		// A round trip to the page, so its events have arrived, and
		// polling under the deadline above.
		eval[int](tb, "1")
		<-tick.C
	}
}

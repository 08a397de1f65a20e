package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium package; `make test` installs it when missing.
const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium with a fresh profile, watching for JavaScript
// dialogs (which the escaping tests must never see) and console messages (where
// Content-Security-Policy violations show up).
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32
	mu      sync.Mutex
	console []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if os.Getenv("ONCEHOOK_SKIP_BROWSER") == "1" {
		t.Skip("ONCEHOOK_SKIP_BROWSER=1: the browser tests are skipped")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser tests need Debian's chromium at %s (%v): run `make test`, which installs it "+
			"(or set ONCEHOOK_SKIP_BROWSER=1 to skip them knowingly)", chromiumPath, err)
	}
	dir, err := os.MkdirTemp("", "oncehook-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		// Chromium's helpers may still write to the profile for a moment after it exits.
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // retry interval
		}
	})
	b := &browser{t: t, ctx: ctx, base: base}
	// The first Run starts the browser and must have no deadline: a deadline
	// on it would end the browser with it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m.String())
			b.mu.Unlock()
		}
	}()
	return b
}

// step bounds one browser action generously: the machine is shared.
const step = 60 * time.Second

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open loads a path of the server and waits for sel to show.
func (b *browser) open(path, sel string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// submit clicks a button that loads a new page, and waits for that page's load.
func (b *browser) submit(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
}

// text reads the text of the first node sel finds. A page that updates itself
// swaps its nodes for new ones, and chromedp reads a node in two steps (find it,
// then read it by its id): when the swap falls between them the node read is
// gone, so the read starts again with the node that replaced it.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	for {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil {
			return s
		}
		if !nodeReplaced(err) || ctx.Err() != nil {
			b.t.Fatalf("text of %s: %v", sel, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// nodeReplaced tells whether err is Chromium's answer about a node that was
// removed from the page between finding it and reading it.
func nodeReplaced(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "No node with given id found") ||
		strings.Contains(msg, "Could not find node with given id") ||
		strings.Contains(msg, "Node with given id does not belong to the document") ||
		strings.Contains(msg, "Node is detached from document")
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func (b *browser) location() string {
	return eval[string](b, "location.pathname + location.search")
}

// login signs in through the form, as a person would.
func (b *browser) login(email, pass string) {
	b.t.Helper()
	b.open("/login", "#email")
	b.do("fill the login form",
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), pass))
	b.submit(`form[action="/login"] button[type=submit]`)
}

func (b *browser) logout() {
	b.t.Helper()
	_ = eval[bool](b, `document.querySelector('details.nav-user').open = true`)
	b.submit(`form[action="/logout"] button`)
}

// screenshot saves the viewport as artifacts/screenshots/name.png at the top of
// the repository (ignored by git), for people to look at after a run.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "artifacts", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// cspViolations are the console messages in which the browser refused something
// under the Content-Security-Policy: an inline script or style slipped in.
func (b *browser) cspViolations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if strings.Contains(m, "Content Security Policy") {
			out = append(out, m)
		}
	}
	return out
}

// unfold opens a queue's folded filter and bulk acts.
func (b *browser) unfold() {
	b.t.Helper()
	_ = eval[bool](b, `(document.querySelectorAll('details.tool').forEach(d => d.open = true), true)`)
}

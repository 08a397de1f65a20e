// Package static embeds the dashboard's CSS and scripts and serves each under a
// URL that contains a hash of its content, so browsers may cache it for a year:
// a changed file gets a new URL, and pages always name the current one.
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed css js img
var files embed.FS

// Prefix is where the assets are served.
const Prefix = "/static/"

type asset struct {
	body  []byte
	ctype string
}

// byURL maps each hashed URL to its file; byName maps a file name to its URL.
var byURL, byName = index()

func index() (map[string]asset, map[string]string) {
	urls, names := map[string]asset{}, map[string]string{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(p)
		u := Prefix + strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		urls[u] = asset{body: b, ctype: mime.TypeByExtension(ext)}
		names[p] = u
		return nil
	})
	if err != nil {
		panic("static: index embedded files: " + err.Error()) // the embed is fixed at build time
	}
	return urls, names
}

// URL returns the content-hashed URL of an embedded file such as "css/app.css".
// It panics on an unknown name: that is a typo in the program, caught by any test
// that renders a page.
func URL(name string) string {
	u, ok := byName[name]
	if !ok {
		panic("static: no embedded file " + name)
	}
	return u
}

// Favicon serves the icon at /favicon.ico, where browsers ask for it on every
// page whatever the page links: an SVG, which they all read there.
func Favicon() http.Handler {
	a := byURL[URL("img/favicon.svg")]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("Content-Type", a.ctype)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

// Handler serves the embedded files at their hashed URLs with a year-long,
// immutable cache lifetime; any other path under Prefix is 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := byURL[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("Content-Type", a.ctype)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

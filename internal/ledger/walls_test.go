package ledger_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

const module = "github.com/oncehook/oncehook/"

// stages are the packages around the core, each a room of its own (the layout in
// docs/development.md). engine is the wiring that starts the router and the
// performer.
var stages = []string{"inbox", "router", "performer", "review", "accounts", "oauthstore", "backfill", "retention", "notify"}

// doors are the exported names a stage may use of another stage: nothing else of
// it. Each is a service the other stage offers to the whole program.
var doors = map[[2]string][]string{
	{"review", "accounts"}:    {"ListUsers", "AccountHolders"}, // who work can be assigned to
	{"retention", "accounts"}: {"DeleteExpiredSessions"},       // expired sign-ins go with the rest
	{"notify", "accounts"}:    {"ListUsers"},                   // a digest holds what its reader may see
}

// webStages are the stages whose services web's handlers call: the inbox for
// ingest, review for the pages and the API, accounts for sign-in and admin.
var webStages = []string{"inbox", "review", "accounts"}

// webWiring is web's file that builds the server from the three services, the one
// file that may name more than one of them.
const webWiring = "web/server.go"

// coreImports are what the core may import: the database, the wake-ups' batcher
// and the config schema. Metrics, tracing, JSON pointers and money are leaves
// that import it, not the reverse.
var coreImports = []string{"db", "internal/batch", "internal/settings"}

// settingsImports are what the config schema may import: it sits below the core,
// which, like config's loader, imports it.
var settingsImports = []string{"internal/jsonpointer", "internal/money"}

// leaves import the core and nothing of the stages.
var leaves = []string{"internal/provider", "internal/destination", "internal/config", "internal/batch", "internal/jsonscan", "internal/telemetry", "internal/sender",
	"internal/jsonpointer", "internal/money", "internal/tracing", "internal/metrics", "internal/settings",
	"internal/store"}

func TestWallsHold(t *testing.T) {
	for _, v := range walls(t, os.DirFS("../..")) {
		t.Error(v)
	}
}

// TestWallsCatchForbiddenImports checks the checker: each file below breaks one
// wall, and each must be reported.
func TestWallsCatchForbiddenImports(t *testing.T) {
	src := func(pkg string, imports ...string) *fstest.MapFile {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\nimport (\n", pkg)
		for _, i := range imports {
			fmt.Fprintf(&b, "\t%q\n", module+i)
		}
		b.WriteString(")\n\nvar _ = 0\n")
		for _, i := range imports {
			fmt.Fprintf(&b, "var _ = %s.X\n", path.Base(i))
		}
		return &fstest.MapFile{Data: []byte(b.String())}
	}
	cases := map[string]*fstest.MapFile{
		"internal/review/a.go":    src("review", "internal/performer"),
		"internal/ledger/a.go":    src("ledger", "internal/router"),
		"internal/engine/a.go":    src("engine", "internal/review"),
		"views/a.go":              src("views", "internal/review"),
		"web/a.go":                src("web", "db"),
		"web/b.go":                src("web", "internal/inbox", "internal/review"),
		"internal/config/a.go":    src("config", "internal/router"),
		"internal/retention/a.go": src("retention", "internal/accounts"), // not through its door
		"internal/ledger/b.go":    src("ledger", "internal/metrics"),
		"internal/settings/a.go":  src("settings", "internal/ledger"),
		"internal/router/a.go":    {Data: []byte("package router\n\nfunc f(m interface{ Sharded() bool }) bool { return m.Sharded() }\n")},
		"internal/review/b.go":    {Data: []byte("package review\n\nimport \"" + module + "internal/store\"\n\nvar _ = store.Sharded{}\n")},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			got := walls(t, fstest.MapFS{name: f})
			if len(got) == 0 {
				t.Errorf("%s breaks a wall, and nothing was reported", name)
			}
		})
	}
	ok := fstest.MapFS{"internal/review/a.go": {Data: []byte("package review\n\nimport \"" + module +
		"internal/accounts\"\n\nvar _ = accounts.ListUsers\n")}}
	if got := walls(t, ok); len(got) != 0 {
		t.Errorf("a use through a door was refused: %v", got)
	}
}

// walls returns every import or use in fsys's non-test Go files that breaks a wall.
func walls(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && name != "." || d.Name() == "node_modules" || d.Name() == "testdata") {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, b, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, fileWalls(name, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func fileWalls(name string, f *ast.File) []string {
	dir := path.Dir(name)
	stage := strings.TrimPrefix(dir, "internal/")
	isStage := slices.Contains(stages, stage) && strings.HasPrefix(dir, "internal/")
	var out []string
	refuse := func(why string, args ...any) { out = append(out, name+": "+fmt.Sprintf(why, args...)) }
	used := usedNames(f)
	webUses := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(p, module) {
			continue
		}
		p = strings.TrimPrefix(p, module)
		other := strings.TrimPrefix(p, "internal/")
		otherIsStage := strings.HasPrefix(p, "internal/") && slices.Contains(stages, other)
		local := path.Base(p)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		switch {
		case isStage && (otherIsStage || p == "internal/engine" || p == "web" || p == "views" || strings.HasPrefix(p, "cmd/")):
			names, ok := doors[[2]string{stage, other}]
			if !ok {
				refuse("stage %s imports %s: stages meet only through the doors listed in walls_test.go", stage, p)
				continue
			}
			for _, n := range used[local] {
				if !slices.Contains(names, n) {
					refuse("stage %s uses %s.%s, which is not its door to %s (%v)", stage, other, n, other, names)
				}
			}
		case dir == "internal/ledger" && (otherIsStage || p == "internal/engine" || p == "web" || p == "views"):
			refuse("the core imports %s: it must import no stage", p)
		case dir == "internal/ledger" && !slices.Contains(coreImports, p):
			refuse("the core imports %s: it imports only %v", p, coreImports)
		case dir == "internal/settings" && !slices.Contains(settingsImports, p):
			refuse("the config schema imports %s: it sits below the core and imports only %v", p, settingsImports)
		case dir == "internal/engine" && !slices.Contains([]string{"internal/ledger", "internal/batch", "internal/performer", "internal/router", "internal/store"}, p):
			refuse("the wiring imports %s: it starts the router and the performer on one store and nothing else", p)
		case dir == "views" && p != "internal/ledger":
			refuse("views imports %s: views see the core's types only", p)
		case dir == "web" && (otherIsStage && !slices.Contains(webStages, other) || p == "db" || p == "internal/engine"):
			refuse("web imports %s: handlers call the services of %v only, never db", p, webStages)
		case slices.Contains(leaves, dir) && (otherIsStage || p == "internal/engine"):
			refuse("the leaf %s imports the stage %s", dir, p)
		}
		if dir == "web" && otherIsStage {
			webUses[other] = true
		}
	}
	out = append(out, storeWalls(name, dir, f, used)...)
	if dir == "web" && name != webWiring && len(webUses) > 1 {
		refuse("a handler's file calls the services of %v: each handler calls one stage's service", slices.Sorted(maps.Keys(webUses)))
	}
	return out
}

// storeWalls refuses, outside internal/store, a question of which database
// this is (a call of a method Sharded) and a use of one form of the store by
// name (store.Single, store.Sharded): the stages call the Store that store.For
// chose.
func storeWalls(name, dir string, f *ast.File, used map[string][]string) []string {
	if dir == "internal/store" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if se, ok := call.Fun.(*ast.SelectorExpr); ok && se.Sel.Name == "Sharded" {
				out = append(out, name+": asks whether the database is Citus (Sharded()): only internal/store may")
			}
		}
		return true
	})
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != module+"internal/store" {
			continue
		}
		local := "store"
		if imp.Name != nil {
			local = imp.Name.Name
		}
		for _, n := range used[local] {
			if n == "Single" || n == "Sharded" {
				out = append(out, name+": names the store's form store."+n+": the stages call the Store store.For chose")
			}
		}
	}
	return out
}

// usedNames returns, for each package name, the names selected from it in f.
func usedNames(f *ast.File) map[string][]string {
	out := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := se.X.(*ast.Ident); ok && !slices.Contains(out[x.Name], se.Sel.Name) {
				out[x.Name] = append(out[x.Name], se.Sel.Name)
			}
		}
		return true
	})
	return out
}

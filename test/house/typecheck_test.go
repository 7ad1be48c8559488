package house

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode"

	"golang.org/x/sync/errgroup"
)

// checkedPackage is a module package with the type facts the lock rule reads.
type checkedPackage struct {
	*sourcePackage
	types *types.Package
	info  *types.Info
}

// checker type-checks the module's packages, function bodies included, and
// their imports (the standard library from GOROOT, dependencies from the
// module cache at go.mod's versions) from source without their bodies. It
// resolves import paths itself rather than through go/importer's "source"
// importer, which runs `go list` once per imported package (27 s for this
// module on the shared machine, against about two seconds here); it needs
// only Go (one `go env` for GOROOT and the module cache) and the module
// cache `go test` has already filled: no network, no export data, no
// golang.org/x/tools.
type checker struct {
	tr       *tree
	ctx      build.Context
	modcache string
	requires map[string]string // module path -> version, from go.mod
	checked  map[string]*checkedPackage
	deps     map[string]*types.Package // by directory: std's vendored copies differ by path
	busy     map[string]bool           // import cycle guard
}

var (
	checkOnce sync.Once
	checked   []*checkedPackage
	checkErr  error
)

// typeCheck checks every package of the module once per test binary.
func typeCheck(t *testing.T) (*tree, []*checkedPackage) {
	t.Helper()
	tr := loadTree(t)
	checkOnce.Do(func() { checked, checkErr = checkModule(tr) })
	if checkErr != nil {
		t.Fatalf("type-check the module: %v", checkErr)
	}
	return tr, checked
}

func checkModule(tr *tree) ([]*checkedPackage, error) {
	requires, err := readRequires(filepath.Join(tr.root, "go.mod"))
	if err != nil {
		return nil, err
	}
	env, err := goEnv()
	if err != nil {
		return nil, err
	}
	ctx := *buildContext()
	ctx.GOROOT = env.GOROOT
	modcache := env.GOMODCACHE
	c := &checker{
		tr: tr, ctx: ctx, modcache: modcache, requires: requires,
		checked: map[string]*checkedPackage{},
		deps:    map[string]*types.Package{},
		busy:    map[string]bool{},
	}
	var out []*checkedPackage
	for _, sp := range tr.ordered {
		cp, err := c.check(sp.path)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, nil
}

func (c *checker) Import(path string) (*types.Package, error) {
	return c.ImportFrom(path, c.tr.root, 0)
}

func (c *checker) ImportFrom(path, fromDir string, _ types.ImportMode) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	if path == c.tr.module || strings.HasPrefix(path, c.tr.module+"/") {
		cp, err := c.check(path)
		if err != nil {
			return nil, err
		}
		return cp.types, nil
	}
	dir, err := c.resolve(path, fromDir)
	if err != nil {
		return nil, err
	}
	return c.dependency(path, dir)
}

// check type-checks one module package, after the module packages it
// imports. A type error fails the test: a rule checked on half-typed code
// could pass by missing calls.
func (c *checker) check(path string) (*checkedPackage, error) {
	if cp, ok := c.checked[path]; ok {
		return cp, nil
	}
	sp, ok := c.tr.pkgs[path]
	if !ok {
		return nil, fmt.Errorf("package %s: not in the module's tree", path)
	}
	if c.busy[path] {
		return nil, fmt.Errorf("package %s: import cycle", path)
	}
	c.busy[path] = true
	defer delete(c.busy, path)
	info := &types.Info{
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Uses:       map[*ast.Ident]types.Object{},
	}
	conf := types.Config{Importer: c}
	pkg, err := conf.Check(path, c.tr.fset, sp.files, info)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", path, err)
	}
	cp := &checkedPackage{sourcePackage: sp, types: pkg, info: info}
	c.checked[path] = cp
	return cp, nil
}

// resolve finds the directory of a standard or required package: GOROOT's
// vendor directory for std's own imports, GOROOT/src, or the module cache
// at the version go.mod requires (the longest required module path wins).
func (c *checker) resolve(path, fromDir string) (string, error) {
	goroot := filepath.Join(c.ctx.GOROOT, "src")
	if strings.HasPrefix(fromDir, goroot+string(filepath.Separator)) {
		if d := filepath.Join(goroot, "vendor", path); isDir(d) {
			return d, nil
		}
	}
	if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") {
		if d := filepath.Join(goroot, path); isDir(d) {
			return d, nil
		}
		return "", fmt.Errorf("import %q: not in %s", path, goroot)
	}
	best := ""
	for mod := range c.requires {
		if (path == mod || strings.HasPrefix(path, mod+"/")) && len(mod) > len(best) {
			best = mod
		}
	}
	if best == "" {
		return "", fmt.Errorf("import %q: no module of go.mod provides it", path)
	}
	d := filepath.Join(c.modcache, escapePath(best)+"@"+escapePath(c.requires[best]), strings.TrimPrefix(path, best))
	if !isDir(d) {
		return "", fmt.Errorf("import %q: %s missing (run go mod download)", path, d)
	}
	return d, nil
}

// dependency type-checks a package outside the module without function
// bodies: the rules need its types, not its code.
func (c *checker) dependency(path, dir string) (*types.Package, error) {
	if pkg, ok := c.deps[dir]; ok {
		return pkg, nil
	}
	bp, err := c.ctx.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("import %q from %s: %w", path, dir, err)
	}
	names := make([]string, len(bp.GoFiles))
	for i, n := range bp.GoFiles {
		names[i] = filepath.Join(dir, n)
	}
	files, err := parseFiles(c.tr.fset, names, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("import %q: %w", path, err)
	}
	conf := types.Config{Importer: importerAt{c, dir}, IgnoreFuncBodies: true}
	pkg, err := conf.Check(path, c.tr.fset, files, nil)
	if err != nil {
		return nil, fmt.Errorf("import %q: %w", path, err)
	}
	c.deps[dir] = pkg
	return pkg, nil
}

// importerAt resolves a dependency's imports from its own directory, so
// std's vendored packages are found.
type importerAt struct {
	c   *checker
	dir string
}

func (i importerAt) Import(path string) (*types.Package, error) {
	return i.c.ImportFrom(path, i.dir, 0)
}

// parseFiles parses files on every CPU: parsing is most of the time the
// dependencies take, and `make test` runs this under -race.
func parseFiles(fset *token.FileSet, names []string, mode parser.Mode) ([]*ast.File, error) {
	files := make([]*ast.File, len(names))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, name := range names {
		g.Go(func() error {
			f, err := parser.ParseFile(fset, name, nil, mode)
			if err != nil {
				return fmt.Errorf("parse %s: %w", name, err)
			}
			files[i] = f
			return nil
		})
	}
	return files, g.Wait()
}

// goEnv asks the go command where the standard library and the module
// cache are: a test binary built with -trimpath does not know its GOROOT,
// and GOMODCACHE may be set by `go env -w` rather than in the environment.
func goEnv() (struct{ GOROOT, GOMODCACHE string }, error) {
	var env struct{ GOROOT, GOMODCACHE string }
	out, err := exec.Command("go", "env", "-json", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		return env, fmt.Errorf("go env GOROOT GOMODCACHE: %w", err)
	}
	if err := json.Unmarshal(out, &env); err != nil {
		return env, fmt.Errorf("read go env's answer %q: %w", out, err)
	}
	if env.GOROOT == "" || env.GOMODCACHE == "" {
		return env, fmt.Errorf("go env answered no GOROOT or GOMODCACHE: %s", out)
	}
	return env, nil
}

// readRequires reads go.mod's require lines, single and in blocks. The
// module has no replace directive; one would need resolving here.
func readRequires(gomod string) (map[string]string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return nil, fmt.Errorf("read go.mod: %w", err)
	}
	req := map[string]string{}
	inBlock := false
	for _, line := range bytes.Split(data, []byte("\n")) {
		f := strings.Fields(strings.SplitN(string(line), "//", 2)[0])
		switch {
		case len(f) == 0:
		case f[0] == "replace":
			return nil, fmt.Errorf("go.mod has a replace directive; the house test does not resolve it")
		case inBlock && f[0] == ")":
			inBlock = false
		case inBlock && len(f) >= 2:
			req[f[0]] = f[1]
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			inBlock = true
		case f[0] == "require" && len(f) >= 3:
			req[f[1]] = f[2]
		}
	}
	return req, nil
}

// escapePath is the module cache's case encoding: an upper-case letter is
// '!' and its lower case.
func escapePath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

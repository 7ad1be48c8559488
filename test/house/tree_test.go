// Package house holds tests of the house's structural rules (STYLE.md):
// where a mutex is locked, how long functions and files grow, which rooms
// import a Kafka client. They read the module's source with go/parser and
// go/types, need only Go, and run in a few seconds under -short.
package house

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// sourcePackage is one directory of the module with its non-test Go files,
// parsed once for every check of this package.
type sourcePackage struct {
	dir   string      // relative to the module root, slash-separated ("." for the root)
	path  string      // import path
	files []*ast.File // what the current build compiles: the type checker's input
	all   []*ast.File // every non-test file, whatever its build constraints
}

// tree is the module as the checks see it: every package with non-test Go
// files, keyed by import path, sharing one FileSet.
type tree struct {
	root    string // absolute module root
	module  string // module path
	fset    *token.FileSet
	pkgs    map[string]*sourcePackage
	ordered []*sourcePackage // by import path
}

var (
	loadOnce   sync.Once
	loadedTree *tree
	loadErr    error
)

// loadTree parses the module once per test binary; every check shares it.
func loadTree(t *testing.T) *tree {
	t.Helper()
	loadOnce.Do(func() { loadedTree, loadErr = parseModule() })
	if loadErr != nil {
		t.Fatalf("read the module's source: %v", loadErr)
	}
	return loadedTree
}

// parseModule walks the module from its go.mod down, skipping testdata,
// hidden and underscore directories and nested modules (tools/ has its own
// go.mod), and parses each non-test file the current build would compile.
func parseModule() (*tree, error) {
	root, module, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	tr := &tree{root: root, module: module, fset: token.NewFileSet(), pkgs: map[string]*sourcePackage{}}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && skipDir(p, d.Name()) {
			return filepath.SkipDir
		}
		return tr.parseDir(p)
	})
	if err != nil {
		return nil, err
	}
	for _, sp := range tr.pkgs {
		tr.ordered = append(tr.ordered, sp)
	}
	sort.Slice(tr.ordered, func(i, j int) bool { return tr.ordered[i].path < tr.ordered[j].path })
	if len(tr.ordered) == 0 {
		return nil, fmt.Errorf("no Go package under %s", root)
	}
	return tr, nil
}

// skipDir reports whether a directory below the root is outside the
// module's packages: testdata, hidden and underscore directories (as the go
// command ignores them) and nested modules.
func skipDir(path, name string) bool {
	if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// parseDir adds the directory's package if it has non-test Go files that
// match the current build's constraints.
func (tr *tree) parseDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	rel, err := filepath.Rel(tr.root, dir)
	if err != nil {
		return fmt.Errorf("relative path of %s: %w", dir, err)
	}
	rel = filepath.ToSlash(rel)
	sp := &sourcePackage{dir: rel, path: tr.module}
	if rel != "." {
		sp.path = tr.module + "/" + rel
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		name := filepath.Join(dir, n)
		f, err := parser.ParseFile(tr.fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", name, err)
		}
		sp.all = append(sp.all, f)
		ok, err := buildContext().MatchFile(dir, n)
		if err != nil {
			return fmt.Errorf("build constraints of %s: %w", name, err)
		}
		if ok {
			sp.files = append(sp.files, f)
		}
	}
	if len(sp.all) > 0 {
		tr.pkgs[sp.path] = sp
	}
	return nil
}

// buildContext is the build the type checker sees: this machine's, with
// cgo off so that only pure-Go files are read and no cgo tool runs.
func buildContext() *build.Context {
	ctx := build.Default
	ctx.CgoEnabled = false
	return &ctx
}

// rel names a file by its path from the module root, as a reader finds it.
func (tr *tree) rel(name string) string {
	r, err := filepath.Rel(tr.root, name)
	if err != nil {
		return name
	}
	return filepath.ToSlash(r)
}

// position renders pos as path:line from the module root.
func (tr *tree) position(pos token.Pos) string {
	p := tr.fset.Position(pos)
	return fmt.Sprintf("%s:%d", tr.rel(p.Filename), p.Line)
}

// moduleRoot finds the go.mod above the test's directory and reads its
// module path.
func moduleRoot() (root, module string, err error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range bytes.Split(data, []byte("\n")) {
				if f := strings.Fields(string(line)); len(f) == 2 && f[0] == "module" {
					return dir, strings.Trim(f[1], `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", filepath.Join(dir, "go.mod"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

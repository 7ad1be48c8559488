package house

import (
	"fmt"
	"go/ast"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// Limits of STYLE.md's "Pitfalls seen elsewhere" and the house rules: past
// them a file or a function has more than one job.
const (
	maxFileLines = 400
	maxFuncLines = 80
)

const sizeRule = `STYLE.md, Pitfalls: "God structs holding every connection and channel; ` +
	`files past ~400 lines; one function that reads, decodes, publishes and checkpoints." ` +
	`House rules: no file over ~400 lines, no function over 80 lines.`

// sizeAllowed lists the non-test files and functions over their limit when
// this test was written, keyed by path (a file) or path: name (a function),
// each with why. Empty: none. An entry no longer needed fails the test.
var sizeAllowed = map[string]string{}

// TestFilesAndFunctionsStaySmall fails on a non-test Go file over 400 lines
// or a non-test function or method over 80 (from its func keyword to its
// closing brace; a long function literal counts within its function).
func TestFilesAndFunctionsStaySmall(t *testing.T) {
	tr := loadTree(t)
	used := map[string]bool{}
	var bad []string
	report := func(key, msg string) {
		if _, ok := sizeAllowed[key]; ok {
			used[key] = true
			return
		}
		bad = append(bad, msg)
	}
	files, funcs := 0, 0
	for _, sp := range tr.ordered {
		for _, f := range sp.all {
			files++
			tf := tr.fset.File(f.Pos())
			path := tr.rel(tf.Name())
			if n := tf.LineCount(); n > maxFileLines {
				report(path, fmt.Sprintf("%s:1: file of %d lines (limit %d)", path, n, maxFileLines))
			}
			for _, fn := range functions(f) {
				funcs++
				start, end := tr.fset.Position(fn.pos), tr.fset.Position(fn.end)
				if n := end.Line - start.Line + 1; n > maxFuncLines {
					report(path+": "+fn.name, fmt.Sprintf("%s:%d: %s is %d lines (limit %d)", path, start.Line, fn.name, n, maxFuncLines))
				}
			}
		}
	}
	if funcs == 0 {
		t.Fatalf("found no function in %d files: the check reads nothing", files)
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d file(s) or function(s) over the house's limits:\n\t%s\nRule: %s\n"+
			"Split by job (a type, a step of the walk), not by cutting a file or a function in two.",
			len(bad), strings.Join(bad, "\n\t"), sizeRule)
	}
	for key := range sizeAllowed {
		if !used[key] {
			t.Errorf("sizeAllowed[%q] is no longer needed: delete the entry so the exception cannot come back", key)
		}
	}
	t.Logf("%d files, %d functions checked", files, funcs)
}

// function is one function's span: a declaration, or a function literal
// outside any declaration (a package-level var = func...).
type function struct {
	name     string
	pos, end token.Pos
}

func functions(f *ast.File) []function {
	var out []function
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				out = append(out, function{funcName(d), d.Pos(), d.End()})
			}
		case *ast.GenDecl:
			ast.Inspect(d, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					out = append(out, function{"func literal", lit.Pos(), lit.End()})
					return false
				}
				return true
			})
		}
	}
	return out
}

// funcName is name for a function and (Recv).name for a method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	recv := d.Recv.List[0].Type
	for {
		switch r := recv.(type) {
		case *ast.StarExpr:
			recv = r.X
			continue
		case *ast.IndexExpr:
			recv = r.X
			continue
		case *ast.IndexListExpr:
			recv = r.X
			continue
		}
		break
	}
	if id, ok := recv.(*ast.Ident); ok {
		return "(" + id.Name + ")." + d.Name.Name
	}
	return d.Name.Name
}

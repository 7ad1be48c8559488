package relay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestConfigErrorsNameRealFields reads this package's source: every
// ConfigError (bad, badPredicate) names its field as a literal path that
// is a setting (not a struct of settings) of the type whose method makes
// it, and every setting its message refers to ({Path}) is one too. So a
// renamed field, or a typo, fails here; and package config, which names
// each of Config's settings by its flag, names every field an error can.
func TestConfigErrorsNameRealFields(t *testing.T) {
	receivers := map[string]reflect.Type{}
	for _, v := range []any{Config{}, Table{}, Route{}, Kafka{}, Producer{}, Contracts{}, Delivery{}} {
		receivers[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\{\*?([A-Za-z0-9.\[\]]+)(=[^{}]*)?\}`)
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "bad" || fn.Name.Name == "badPredicate" {
				continue // the helpers pass their callers' fields on
			}
			recv := receiverName(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				id, ok := call.Fun.(*ast.Ident)
				if !ok || id.Name != "bad" && id.Name != "badPredicate" {
					return true
				}
				calls++
				at := fset.Position(call.Pos())
				typ, known := receivers[recv]
				if !known {
					t.Errorf("%s: %s in %s, whose receiver %q this test does not know: add it", at, id.Name, fn.Name.Name, recv)
					return true
				}
				field, ok := literal(call.Args[0])
				if !ok {
					t.Errorf("%s: %s's field is not a string literal", at, id.Name)
					return true
				}
				if err := setting(typ, field); err != "" {
					t.Errorf("%s: field %q of %s: %s", at, field, recv, err)
				}
				if len(call.Args) > 1 {
					if format, ok := literal(call.Args[1]); ok {
						for _, m := range ref.FindAllStringSubmatch(format, -1) {
							if err := setting(typ, m[1]); err != "" {
								t.Errorf("%s: message refers to %q of %s: %s", at, m[1], recv, err)
							}
						}
					}
				}
				return true
			})
		}
	}
	if calls < 50 {
		t.Fatalf("found %d ConfigErrors in the source, want the 50 and more there are: is the test reading it?", calls)
	}
}

// receiverName is fn's receiver's type name; "" for a function.
func receiverName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	switch x := fn.Recv.List[0].Type.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// setting says why path is not a setting of typ: "" when it is.
func setting(typ reflect.Type, path string) string {
	for _, name := range strings.Split(path, ".") {
		if typ.Kind() != reflect.Struct {
			return name + " is inside a setting"
		}
		f, ok := typ.FieldByName(name)
		if !ok || !f.IsExported() {
			return "no field " + name + " in " + typ.String()
		}
		typ = f.Type
	}
	if typ.Kind() == reflect.Struct {
		return "a struct of settings, not one"
	}
	return ""
}

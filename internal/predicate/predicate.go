// Package predicate judges an operator's SQL predicate without a server:
// --backfill-where, which a backfill's SELECT filters by, and --where, a
// publication's row filter. Both come from configuration, and nothing from
// configuration reaches SQL as given: Parse refuses what is not one
// expression (statements, parameters, subqueries), and Expr.SQL renders
// the expression from the tokens Parse judged. What only the server can
// tell (the columns, volatility, a row filter's own limits) is its
// callers' to check.
package predicate

import (
	"fmt"
	"slices"
	"strings"
)

// Expr is a predicate that passed Parse: one expression, holding no
// statement separator, no parameter, no query keyword, and parentheses
// that balance.
type Expr struct {
	expr  string
	sql   string   // rendered from the tokens
	funcs []string // names called as functions
	ops   []string // operators used
	toks  []token  // as Parse read them, which Restrict reads again
	cols  []Column // the columns it reads, when ParseRestricted judged it
}

// String returns the expression as given.
func (e Expr) String() string { return e.expr }

// SQL returns the expression rendered from its tokens, one space between
// each: comments and line breaks, where the server's reading and Parse's
// could part, are gone, and what is left re-reads as the same tokens
// (Parse checked). Always put it inside parentheses.
func (e Expr) SQL() string { return e.sql }

// Funcs returns the names the expression calls as functions.
func (e Expr) Funcs() []string { return e.funcs }

// Ops returns the operators the expression uses (casts aside).
func (e Expr) Ops() []string { return e.ops }

// IsZero reports whether e is the zero Expr (no predicate).
func (e Expr) IsZero() bool { return e.sql == "" }

// keywords that begin or join a query: a predicate holding one of them
// could read another relation, so it is refused before any server sees it
// (a quoted identifier of the same spelling is fine).
var queryKeywords = []string{"select", "union", "intersect", "except", "values", "table", "with", "into", "returning", "lateral"}

// Parse judges where, given as flag (such as --backfill-where, which
// errors name), without a server: it must lex as one expression (no
// statement separator, no parameter, parentheses that never close more
// than they open, no query keyword).
func Parse(flag, where string) (Expr, error) {
	e := Expr{expr: where}
	fail := func(format string, a ...any) (Expr, error) {
		return Expr{}, fmt.Errorf("%s %q: %s", flag, where, fmt.Sprintf(format, a...))
	}
	toks, err := lexExpr(where)
	if err != nil {
		return fail("%v", err)
	}
	if len(toks) == 0 {
		return fail("empty")
	}
	depth := map[string]int{"(": 0, "[": 0}
	closes := map[string]string{")": "(", "]": "["}
	for i, t := range toks {
		switch {
		case t.kind == tokPunct && t.text == ";":
			return fail("a semicolon: the predicate must be one expression, not statements")
		case t.kind == tokParam:
			return fail("parameter %s: write the value itself", t.text)
		case t.kind == tokWord && slices.Contains(queryKeywords, t.text) && !zoneWith(toks, i):
			return fail("%q: a subquery or another statement is not allowed; the predicate is one boolean expression over the outbox table's own columns", strings.ToUpper(t.text))
		case t.kind == tokPunct && (t.text == "(" || t.text == "["):
			depth[t.text]++
		case t.kind == tokPunct && closes[t.text] != "":
			if depth[closes[t.text]]--; depth[closes[t.text]] < 0 {
				return fail("%q closes what it did not open", t.text)
			}
		case t.kind == tokOp && t.text != "::":
			e.ops = append(e.ops, t.text)
		}
		if (t.kind == tokWord || t.kind == tokQuoted) && i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == "(" {
			e.funcs = append(e.funcs, t.text)
		}
	}
	if depth["("] != 0 || depth["["] != 0 {
		return fail("unbalanced parentheses or brackets")
	}
	if e.sql, err = render(toks); err != nil {
		return fail("%v", err)
	}
	e.toks = toks
	return e, nil
}

// zoneWith reports whether toks[i], a WITH, is the one of SQL's type names
// timestamp [(p)] with time zone and time [(p)] with time zone: right after
// the type (and its precision), right before TIME ZONE, where no query can
// begin.
func zoneWith(toks []token, i int) bool {
	isWord := func(j int, w string) bool {
		return j >= 0 && j < len(toks) && toks[j].kind == tokWord && toks[j].text == w
	}
	isPunct := func(j int, s string) bool {
		return j >= 0 && toks[j].kind == tokPunct && toks[j].text == s
	}
	if !isWord(i, "with") || !isWord(i+1, "time") || !isWord(i+2, "zone") {
		return false
	}
	typ := i - 1
	if isPunct(i-1, ")") && i >= 4 && toks[i-2].kind == tokNumber && isPunct(i-3, "(") {
		typ = i - 4 // a precision: timestamp(3) with time zone
	}
	return isWord(typ, "timestamp") || isWord(typ, "time")
}

// render joins toks as written, one space between each, and checks that
// the result reads back as the same tokens: a space can part two tokens
// but never join them, so this only fails on a lexer bug, refused rather
// than passed on.
func render(toks []token) (string, error) {
	parts := make([]string, len(toks))
	for i, t := range toks {
		parts[i] = t.raw
	}
	sql := strings.Join(parts, " ")
	again, err := lexExpr(sql)
	if err != nil || !slices.Equal(again, toks) {
		return "", fmt.Errorf("cannot be rendered back as the same tokens (%v)", err)
	}
	return sql, nil
}

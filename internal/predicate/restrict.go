package predicate

import (
	"errors"
	"fmt"
	"strconv"
)

// ParseRestricted judges a predicate that runs with the relay's role over
// rows it reads (--backfill-where), without a server: Parse, then no
// comment (what the server would skip is not left for it to read
// otherwise), then Restrict.
func ParseRestricted(flag, where string) (Expr, error) {
	e, err := Parse(flag, where)
	if err != nil {
		return Expr{}, err
	}
	if at, ok := firstComment(where); ok {
		return Expr{}, fmt.Errorf("%s %q: a comment at offset %d: comments are not allowed in %s", flag, where, at, flag)
	}
	cols, err := restrict(flag, e)
	if err != nil {
		return Expr{}, err
	}
	e.cols = cols
	return e, nil
}

// Restrict judges e, given as flag, against a restricted grammar of
// PostgreSQL's expressions, which it reads in full and refuses anything it
// does not know: the outbox row's columns by name, constants ('…' and E'…'
// strings, decimal numbers, TRUE, FALSE, NULL, typed constants such as
// interval '7 days'), AND, OR, NOT, IS [NOT] NULL|TRUE|FALSE|UNKNOWN|
// DISTINCT FROM, [NOT] IN (…), [NOT] BETWEEN, [NOT] LIKE|ILIKE|SIMILAR TO,
// op ANY|SOME|ALL (…), ARRAY[…], CASE, AT TIME ZONE, and the functions,
// operators and casts of the allow-lists (allow.go). So it
// holds no subquery, no qualified name (another schema's function, another
// relation's column), no catalogue type, no function reading anything but
// its arguments and the clock.
//
// A grammar checked in Go rather than the server's own judgement: the
// server cannot say what an expression would read without running it
// (EXPLAIN shows a scan of the outbox alone for table_to_xml(…)), its
// catalogue grows with every release and extension, and this is
// deterministic and tested without one.
func Restrict(flag string, e Expr) error {
	_, err := restrict(flag, e)
	return err
}

// restrict is Restrict, returning the columns e names.
func restrict(flag string, e Expr) ([]Column, error) {
	p := restrictedParser{flag: flag, toks: e.toks}
	err := p.orExpr()
	if err == nil && p.pos < len(p.toks) {
		err = p.unexpected()
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, e.expr, err)
	}
	return p.cols, nil
}

// firstComment returns the offset of src's first comment, if any.
func firstComment(src string) (int, bool) {
	for i := 0; i < len(src); {
		end, err := skipSpace(src, i)
		if err != nil {
			return i, true // an unterminated comment (Parse refused it first)
		}
		if end > i {
			if end > i+1 || src[i] == '-' || src[i] == '/' {
				return i, true
			}
			i = end
			continue
		}
		_, end, err = lexToken(src, i)
		if err != nil {
			return 0, false
		}
		i = end
	}
	return 0, false
}

// tokEnd is what restrictedParser.peek returns past the last token.
const tokEnd tokenKind = -1

// restrictedParser reads an expression's tokens by recursive descent,
// following PostgreSQL's precedence (lowest first): OR, AND, NOT, IS,
// comparison, IN/BETWEEN/LIKE/SIMILAR, other operators, + -, * / %, AT
// TIME ZONE, unary + -, ::. Each method reads one level and returns an
// error at the first token it does not accept.
type restrictedParser struct {
	flag string
	toks []token
	pos  int
	cols []Column // the columns read so far
}

func (p *restrictedParser) peekAt(n int) token {
	if p.pos+n < len(p.toks) {
		return p.toks[p.pos+n]
	}
	return token{kind: tokEnd}
}

func (p *restrictedParser) peek() token { return p.peekAt(0) }

// word reports whether the next token is one of the keywords ws.
func (p *restrictedParser) word(ws ...string) bool {
	t := p.peek()
	for _, w := range ws {
		if t.kind == tokWord && t.text == w {
			return true
		}
	}
	return false
}

func (p *restrictedParser) punct(s string) bool {
	t := p.peek()
	return t.kind == tokPunct && t.text == s
}

// op reports whether the next token is an operator of set.
func (p *restrictedParser) op(set map[string]bool) bool {
	t := p.peek()
	return t.kind == tokOp && set[t.text]
}

// expectWord reads the keyword w, or fails.
func (p *restrictedParser) expectWord(w string) error {
	if !p.word(w) {
		return p.unexpected()
	}
	p.pos++
	return nil
}

// expectPunct reads the punctuation s, or fails.
func (p *restrictedParser) expectPunct(s string) error {
	if !p.punct(s) {
		return p.unexpected()
	}
	p.pos++
	return nil
}

// unexpected describes the next token, which the grammar does not accept
// where it stands.
func (p *restrictedParser) unexpected() error {
	t := p.peek()
	switch {
	case t.kind == tokEnd:
		return errors.New("the predicate ends early")
	case t.kind == tokOp && t.text != "::" && !allowedOp(t.text):
		return fmt.Errorf("operator %q is not allowed in %s (write spaces between operators); allowed: %s",
			t.text, p.flag, listed(comparisonOps, additiveOps, multiplyOps, otherOps))
	case t.kind == tokPunct && t.text == ".":
		return errors.New("a qualified name or field (a.b) is not allowed: name the outbox table's column alone, and call functions unqualified")
	case t.kind == tokWord:
		return fmt.Errorf("unexpected %q at token %d", t.text, p.pos+1)
	}
	return fmt.Errorf("unexpected %s at token %d", strconv.Quote(t.raw), p.pos+1)
}

// list reads expressions separated by commas, up to a closing parenthesis.
func (p *restrictedParser) list() error {
	for {
		if err := p.orExpr(); err != nil {
			return err
		}
		if !p.punct(",") {
			return p.expectPunct(")")
		}
		p.pos++
	}
}

func (p *restrictedParser) orExpr() error  { return p.chain(p.andExpr, "or") }
func (p *restrictedParser) andExpr() error { return p.chain(p.notExpr, "and") }

// chain reads next, then next again after each keyword w.
func (p *restrictedParser) chain(next func() error, w string) error {
	if err := next(); err != nil {
		return err
	}
	for p.word(w) {
		p.pos++
		if err := next(); err != nil {
			return err
		}
	}
	return nil
}

func (p *restrictedParser) notExpr() error {
	if p.word("not") {
		p.pos++
		return p.notExpr()
	}
	return p.isExpr()
}

// isExpr reads a comparison and the IS tests, ISNULL and NOTNULL after it.
func (p *restrictedParser) isExpr() error {
	if err := p.comparison(); err != nil {
		return err
	}
	for {
		switch {
		case p.word("isnull", "notnull"):
			p.pos++
		case p.word("is"):
			p.pos++
			if p.word("not") {
				p.pos++
			}
			switch {
			case p.word("null", "true", "false", "unknown"):
				p.pos++
			case p.word("distinct"):
				p.pos++
				if err := p.expectWord("from"); err != nil {
					return err
				}
				if err := p.comparison(); err != nil {
					return err
				}
			default:
				return p.unexpected()
			}
		default:
			return nil
		}
	}
}

// comparison reads one comparison at most: PostgreSQL's are not
// associative (a = b = c is an error there too).
func (p *restrictedParser) comparison() error {
	if err := p.pattern(); err != nil {
		return err
	}
	if p.op(comparisonOps) {
		p.pos++
		return p.rightOperand(true, p.pattern)
	}
	return nil
}

// pattern reads [NOT] IN (…), [NOT] BETWEEN … AND …, [NOT] LIKE|ILIKE …
// [ESCAPE …] (or LIKE|ILIKE ANY|SOME|ALL (…)), [NOT] SIMILAR TO …
// [ESCAPE …] after an operand.
func (p *restrictedParser) pattern() error {
	if err := p.other(); err != nil {
		return err
	}
	if p.word("not") {
		if n := p.peekAt(1); n.kind != tokWord || !setOf("in", "between", "like", "ilike", "similar")[n.text] {
			return nil // NOT begins nothing here: the caller says what follows
		}
		p.pos++
	}
	switch {
	case p.word("in"):
		p.pos++
		if err := p.expectPunct("("); err != nil {
			return err
		}
		return p.list()
	case p.word("between"):
		p.pos++
		if p.word("symmetric", "asymmetric") {
			p.pos++
		}
		if err := p.other(); err != nil {
			return err
		}
		if err := p.expectWord("and"); err != nil {
			return err
		}
		return p.other()
	case p.word("like", "ilike", "similar"):
		similar := p.word("similar")
		p.pos++
		if similar {
			if err := p.expectWord("to"); err != nil {
				return err
			}
		}
		if err := p.rightOperand(!similar, p.other); err != nil {
			return err
		}
		if p.word("escape") {
			p.pos++
			return p.other()
		}
	}
	return nil
}

// other reads the operators of the "any other operator" precedence: text
// concatenation, regular-expression matches, jsonb access and containment.
func (p *restrictedParser) other() error { return p.binary(otherOps, p.additive) }
func (p *restrictedParser) additive() error {
	return p.binary(additiveOps, p.multiplicative)
}
func (p *restrictedParser) multiplicative() error { return p.binary(multiplyOps, p.atTimeZone) }

// binary reads next, then next again after each operator of ops (or a
// quantified operand after a regular-expression match: x ~ ANY (…)).
func (p *restrictedParser) binary(ops map[string]bool, next func() error) error {
	if err := next(); err != nil {
		return err
	}
	for p.op(ops) {
		regex := regexOps[p.peek().text]
		p.pos++
		if err := p.rightOperand(regex, next); err != nil {
			return err
		}
	}
	return nil
}

func (p *restrictedParser) unary() error {
	if p.op(additiveOps) {
		p.pos++
		return p.unary()
	}
	start, col := p.pos, len(p.cols)
	if err := p.primary(); err != nil {
		return err
	}
	p.castColumn(start, col, p.peek().kind == tokOp && p.peek().text == "::")
	for p.peek().kind == tokOp && p.peek().text == "::" {
		p.pos++
		if err := p.typeName(true); err != nil {
			return err
		}
	}
	return nil
}

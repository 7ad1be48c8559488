package predicate

import (
	"fmt"
	"regexp"
	"strings"
)

// The operands of the restricted grammar (restrict.go): constants,
// columns, parenthesised expressions, calls of allowed functions, SQL's
// special forms, typed constants and cast targets.

// decimal is a number as the grammar takes it: no hexadecimal, octal,
// binary or underscores, which only some versions read.
var decimal = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

func (p *restrictedParser) primary() error {
	t := p.peek()
	switch t.kind {
	case tokString:
		return p.str()
	case tokNumber:
		if !decimal.MatchString(t.text) {
			return fmt.Errorf("number %q: write a decimal number", t.text)
		}
		p.pos++
		return nil
	case tokQuoted:
		p.pos++
		if p.punct("(") {
			return fmt.Errorf("a quoted name called as a function (%q) is not allowed in %s: call allowed functions unquoted", t.text, p.flag)
		}
		p.cols = append(p.cols, Column{Name: t.text})
		return p.noQualifier()
	case tokWord:
		return p.wordTerm()
	case tokPunct:
		if t.text == "(" {
			p.pos++
			if err := p.orExpr(); err != nil {
				return err
			}
			if err := p.expectPunct(")"); err != nil {
				return err
			}
			return p.noQualifier()
		}
	}
	return p.unexpected()
}

// str reads a string constant, '…' or E'…': a dollar-quoted string, or a
// bit, hexadecimal, national or Unicode-escaped one, is refused.
func (p *restrictedParser) str() error {
	raw := p.peek().raw
	switch {
	case strings.HasPrefix(raw, "$"):
		return fmt.Errorf("a dollar-quoted string is not allowed in %s: write '…', doubling a quote inside", p.flag)
	case raw[0] != '\'' && !strings.HasPrefix(strings.ToLower(raw), "e'"):
		return fmt.Errorf("%s: only '…' and E'…' strings are allowed in %s", raw, p.flag)
	}
	p.pos++
	return nil
}

// noQualifier fails when a dot follows: a.b names another schema's
// function or type, another relation's column, or a field.
func (p *restrictedParser) noQualifier() error {
	if p.punct(".") {
		return p.unexpected()
	}
	return nil
}

// wordTerm reads what begins with an unquoted word: a constant, a time
// value, a special form, an ARRAY[…] or a CASE, a function call, a typed
// constant or a column.
func (p *restrictedParser) wordTerm() error {
	w, next := p.peek().text, p.peekAt(1)
	call := next.kind == tokPunct && next.text == "("
	switch {
	case w == "true" || w == "false" || w == "null":
		p.pos++
		return nil
	case timeValues[w]:
		p.pos++
		if call && w != "current_date" {
			p.pos++
			if p.peek().kind != tokNumber || !decimal.MatchString(p.peek().text) {
				return p.unexpected()
			}
			p.pos++
			return p.expectPunct(")")
		}
		return nil
	case call && specialForms[w]:
		p.pos += 2
		return p.specialForm(w)
	case w == "array" && next.kind == tokPunct && next.text == "[":
		p.pos += 2
		if err := p.arrayElements(); err != nil {
			return err
		}
		return p.noQualifier()
	case w == "case":
		p.pos++
		return p.caseExpr()
	case call:
		return p.call(w)
	case next.kind == tokPunct && next.text == ".":
		p.pos++
		return p.unexpected()
	case next.kind == tokString || next.kind == tokWord && (typeStarts[w][next.text] || zoneTypes[w] && zoneWords[next.text]):
		// A typed constant: type 'text'.
		if err := p.typeName(false); err != nil {
			return err
		}
		return p.str()
	case keywords[w]:
		return fmt.Errorf("%q is a keyword, not a column of the outbox table, where it stands (write a column of that name quoted: %q)", w, w)
	}
	p.pos++ // a column of the outbox table: the server says whether it has one
	p.cols = append(p.cols, Column{Name: w})
	return nil
}

// call reads a call of an allowed function.
func (p *restrictedParser) call(name string) error {
	if !allowedFuncs[name] {
		return fmt.Errorf("%s is not allowed in %s; allowed: %s", name, p.flag, listed(allowedFuncs, specialForms, timeValues))
	}
	p.pos += 2
	if p.punct(")") {
		p.pos++
		return nil
	}
	return p.list()
}

// specialForm reads the arguments of CAST, EXTRACT, POSITION, SUBSTRING or
// TRIM, past their opening parenthesis.
func (p *restrictedParser) specialForm(name string) error {
	switch name {
	case "cast": // CAST(expr AS type)
		start, col := p.pos, len(p.cols)
		if err := p.orExpr(); err != nil {
			return err
		}
		p.castColumn(start, col, p.word("as"))
		if err := p.expectWord("as"); err != nil {
			return err
		}
		if err := p.typeName(true); err != nil {
			return err
		}
	case "extract": // EXTRACT(field FROM expr): the field is a name, never read as a column
		if t := p.peek(); t.kind != tokWord && t.kind != tokString {
			return p.unexpected()
		}
		p.pos++
		if err := p.expectWord("from"); err != nil {
			return err
		}
		if err := p.orExpr(); err != nil {
			return err
		}
	case "position": // POSITION(a IN b)
		if err := p.other(); err != nil {
			return err
		}
		if err := p.expectWord("in"); err != nil {
			return err
		}
		if err := p.other(); err != nil {
			return err
		}
	default: // SUBSTRING(s FROM a FOR b), TRIM([LEADING|TRAILING|BOTH] [c] FROM s), or with commas
		return p.fromForList(name == "trim")
	}
	return p.expectPunct(")")
}

// fromForList reads SUBSTRING's and TRIM's arguments: expressions parted
// by commas, FROM or FOR, TRIM's led by LEADING, TRAILING or BOTH and
// possibly by FROM itself.
func (p *restrictedParser) fromForList(trim bool) error {
	if trim && p.word("leading", "trailing", "both") {
		p.pos++
	}
	if trim && p.word("from") {
		p.pos++
	}
	for {
		if err := p.orExpr(); err != nil {
			return err
		}
		switch {
		case p.punct(","), p.word("from"), !trim && p.word("for"):
			p.pos++
		default:
			return p.expectPunct(")")
		}
	}
}

// typeStarts are the words that begin a type name of several.
var typeStarts = map[string]map[string]bool{
	"double":    setOf("precision"),
	"character": setOf("varying"),
}

// zoneTypes are the types that WITH|WITHOUT TIME ZONE may follow (after
// their precision, if any): Parse lets WITH through there alone.
var (
	zoneTypes = setOf("timestamp", "time")
	zoneWords = setOf("with", "without")
)

// typeName reads an allowed type, after :: or AS (with a modifier when
// cast and the type takes one, and [] for an array of it), or before a
// typed constant's string.
func (p *restrictedParser) typeName(cast bool) error {
	t := p.peek()
	switch t.kind {
	case tokQuoted:
		return fmt.Errorf("a cast to a quoted type name (%q) is not allowed in %s: write it unquoted", t.text, p.flag)
	case tokWord:
	default:
		return p.unexpected()
	}
	p.pos++
	name := t.text
	if follow := typeStarts[name]; follow != nil && p.word(keysOf(follow)...) {
		name += " " + p.peek().text
		p.pos++
	}
	if err := p.noQualifier(); err != nil {
		return err
	}
	if !allowedTypes[name] {
		return fmt.Errorf("a cast to %s is not allowed in %s; allowed: %s", name, p.flag, listed(allowedTypes))
	}
	if cast && typeModifiers[name] && p.punct("(") {
		p.pos++
		if err := p.typeModifier(); err != nil {
			return err
		}
	}
	if zoneTypes[name] && p.word("with", "without") {
		p.pos++
		if err := p.expectWord("time"); err != nil {
			return err
		}
		if err := p.expectWord("zone"); err != nil {
			return err
		}
	}
	for cast && p.punct("[") {
		p.pos++
		if err := p.expectPunct("]"); err != nil {
			return err
		}
	}
	return nil
}

// typeModifier reads a type's modifier, (n) or (p,s), past its opening
// parenthesis.
func (p *restrictedParser) typeModifier() error {
	for {
		if t := p.peek(); t.kind != tokNumber || !decimal.MatchString(t.text) {
			return p.unexpected()
		}
		p.pos++
		if !p.punct(",") {
			return p.expectPunct(")")
		}
		p.pos++
	}
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

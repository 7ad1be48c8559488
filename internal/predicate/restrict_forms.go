package predicate

// The compound forms of the restricted grammar (restrict.go): quantified
// comparisons, ARRAY[…], CASE and AT TIME ZONE. Each holds only restricted
// expressions, read by the same parser, so none can reach what a plain
// expression cannot.

// Column is a name a restricted predicate reads as the outbox table's
// column (the server says whether the table has it).
type Column struct {
	Name string
	// Cast is true when the column is cast at once (col::text,
	// CAST(col AS text)): what is compared is then the cast's value, of
	// an allowed built-in type, not the column's own.
	Cast bool
}

// Columns returns the columns a predicate that passed ParseRestricted
// reads, in order, once per mention; nil for one that only passed Parse.
func (e Expr) Columns() []Column { return e.cols }

// castColumn marks the column read at p.cols[col] as cast when it was the
// only token read since start and the caller saw a cast follow it.
func (p *restrictedParser) castColumn(start, col int, cast bool) {
	if cast && p.pos == start+1 && len(p.cols) == col+1 {
		p.cols[col].Cast = true
	}
}

// rightOperand reads an operator's right operand, next; or, when the
// operator can be quantified (a comparison, a regular-expression match,
// LIKE or ILIKE), ANY|SOME|ALL (expr), expr an array: a string constant,
// ARRAY[…], a column or a cast, any restricted expression.
func (p *restrictedParser) rightOperand(quantifiable bool, next func() error) error {
	if !quantifiable || !p.word("any", "some", "all") {
		return next()
	}
	if n := p.peekAt(1); n.kind != tokPunct || n.text != "(" {
		return next()
	}
	p.pos += 2
	if err := p.orExpr(); err != nil {
		return err
	}
	return p.expectPunct(")")
}

// arrayElements reads an ARRAY constructor's elements, past its opening
// bracket: restricted expressions, or bracketed lists of them for an array
// of several dimensions (ARRAY[[1,2],[3,4]]), parted by commas.
func (p *restrictedParser) arrayElements() error {
	if p.punct("]") {
		p.pos++
		return nil
	}
	for {
		var err error
		if p.punct("[") {
			p.pos++
			err = p.arrayElements()
		} else {
			err = p.orExpr()
		}
		if err != nil {
			return err
		}
		if !p.punct(",") {
			return p.expectPunct("]")
		}
		p.pos++
	}
}

// caseExpr reads a CASE expression past its CASE, simple (CASE x WHEN v
// THEN …) or searched (CASE WHEN cond THEN …), with an optional ELSE.
func (p *restrictedParser) caseExpr() error {
	if !p.word("when") {
		if err := p.orExpr(); err != nil {
			return err
		}
		if !p.word("when") {
			return p.unexpected()
		}
	}
	for p.word("when") {
		p.pos++
		if err := p.orExpr(); err != nil {
			return err
		}
		if err := p.expectWord("then"); err != nil {
			return err
		}
		if err := p.orExpr(); err != nil {
			return err
		}
	}
	if p.word("else") {
		p.pos++
		if err := p.orExpr(); err != nil {
			return err
		}
	}
	if err := p.expectWord("end"); err != nil {
		return err
	}
	return p.noQualifier()
}

// atTimeZone reads x AT TIME ZONE zone, left to right: it binds tighter
// than * / % and looser than unary minus and ::, as in PostgreSQL.
func (p *restrictedParser) atTimeZone() error {
	if err := p.unary(); err != nil {
		return err
	}
	for p.word("at") {
		if n, z := p.peekAt(1), p.peekAt(2); n.kind != tokWord || n.text != "time" || z.kind != tokWord || z.text != "zone" {
			return nil // not AT TIME ZONE: the caller says what follows
		}
		p.pos += 3
		if err := p.unary(); err != nil {
			return err
		}
	}
	return nil
}

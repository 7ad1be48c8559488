package predicate

import (
	"fmt"
	"strings"
)

// A small lexer for PostgreSQL expressions, enough to judge a predicate
// (--backfill-where, --where) before any server sees it: where its strings,
// quoted identifiers, comments and parentheses begin and end, which words
// are keywords and which names are called as functions. It follows the
// server's scanner (src/backend/parser/scan.l) for everything that can hide
// a parenthesis or a semicolon: standard and escape strings, dollar quotes,
// nested block comments, Unicode-escaped strings and identifiers. Where it
// is unsure it refuses: a predicate it cannot read is an error, never
// passed on.

type tokenKind int

const (
	tokWord   tokenKind = iota // unquoted identifier or keyword, lowercased
	tokQuoted                  // "quoted identifier", unquoted
	tokString                  // any string constant
	tokNumber
	tokOp    // operator characters
	tokPunct // ( ) , [ ] . ; :
	tokParam // $1
)

type token struct {
	kind tokenKind
	text string
	raw  string // as written in the source, which Expr.SQL renders
}

// lexExpr splits src into tokens, dropping whitespace and comments.
func lexExpr(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		end, err := skipSpace(src, i)
		if err != nil {
			return nil, err
		}
		if end > i {
			i = end
			continue
		}
		t, end, err := lexToken(src, i)
		if err != nil {
			return nil, err
		}
		t.raw = src[i:end]
		out = append(out, t)
		i = end
	}
	return out, nil
}

// skipSpace returns the offset past the whitespace character or comment at
// i, or i when there is neither. It runs before lexToken because "--" and
// "/*" would otherwise read as operators. A line comment ends at its line's
// end, or at the end of src.
func skipSpace(src string, i int) (int, error) {
	switch c := src[i]; {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		return i + 1, nil
	case strings.HasPrefix(src[i:], "--"):
		end := strings.IndexAny(src[i:], "\n\r")
		if end < 0 {
			return len(src), nil
		}
		return i + end, nil
	case strings.HasPrefix(src[i:], "/*"):
		return blockComment(src, i)
	}
	return i, nil
}

// lexToken reads the token at i, where skipSpace found neither whitespace
// nor a comment, and returns it with the offset just past it.
func lexToken(src string, i int) (token, int, error) {
	switch c := src[i]; {
	case c == '\'':
		end, err := quotedEnd(src, i, '\'', false)
		if err != nil {
			return token{}, 0, err
		}
		return token{kind: tokString, text: src[i:end]}, end, nil
	case c == '"':
		end, err := quotedEnd(src, i, '"', false)
		if err != nil {
			return token{}, 0, err
		}
		return token{kind: tokQuoted, text: strings.ReplaceAll(src[i+1:end-1], `""`, `"`)}, end, nil
	case c == '$':
		return dollar(src, i)
	case isIdentStart(c):
		return word(src, i)
	case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
		end := numberEnd(src, i)
		return token{kind: tokNumber, text: src[i:end]}, end, nil
	case c == ':' && i+1 < len(src) && src[i+1] == ':':
		// The cast operator, before ':' alone is taken as punctuation.
		return token{kind: tokOp, text: "::"}, i + 2, nil
	case strings.IndexByte("()[],;:.", c) >= 0:
		return token{kind: tokPunct, text: string(c)}, i + 1, nil
	case strings.IndexByte(opChars, c) >= 0:
		end := operatorEnd(src, i)
		return token{kind: tokOp, text: src[i:end]}, end, nil
	default:
		return token{}, 0, fmt.Errorf("unexpected character %q at offset %d", c, i)
	}
}

// dollar reads what starts with '$' at i: a parameter ($1) when a digit
// follows, else a dollar-quoted string ($tag$…$tag$).
func dollar(src string, i int) (token, int, error) {
	if i+1 < len(src) && isDigit(src[i+1]) {
		j := i + 1
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		return token{kind: tokParam, text: src[i:j]}, j, nil
	}
	end, err := dollarQuoted(src, i)
	if err != nil {
		return token{}, 0, err
	}
	return token{kind: tokString, text: src[i:end]}, end, nil
}

// numberEnd returns the offset past the numeric constant at i. Letters,
// digits, underscores, dots and an exponent's sign all belong to it
// (1.5e+3, 0x1F, 1_000), so no part of a constant is read as a name.
func numberEnd(src string, i int) int {
	j := i
	for j < len(src) && (isIdentChar(src[j]) || src[j] == '.' ||
		(src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E')) {
		j++
	}
	return j
}

// operatorEnd returns the offset past the run of operator characters at i.
// The run stops where a comment begins, as in the server's scanner: "a+--x"
// is a plus and a comment, not an operator "+--".
func operatorEnd(src string, i int) int {
	j := i
	for j < len(src) && strings.IndexByte(opChars, src[j]) >= 0 &&
		!strings.HasPrefix(src[j:], "--") && !strings.HasPrefix(src[j:], "/*") {
		j++
	}
	return j
}

const opChars = "+-*/<>=~!@#%^&|`?"

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

// word reads an identifier or keyword at i, or a prefixed string constant
// (E'…', B'…', X'…', N'…', U&'…') or Unicode identifier (U&"…").
func word(src string, i int) (token, int, error) {
	j := i
	for j < len(src) && isIdentChar(src[j]) {
		j++
	}
	w := strings.ToLower(src[i:j])
	quote, escapes, at := byte(0), false, j
	switch {
	case j >= len(src):
	case src[j] == '\'' && w == "e":
		quote, escapes = '\'', true
	case src[j] == '\'' && (w == "b" || w == "x" || w == "n"):
		quote = '\''
	case w == "u" && (strings.HasPrefix(src[j:], "&'") || strings.HasPrefix(src[j:], `&"`)):
		quote, at = src[j+1], j+1
	}
	if quote != 0 {
		end, err := quotedEnd(src, at, quote, escapes)
		if err != nil {
			return token{}, 0, err
		}
		if quote == '"' {
			// The name is only known after UESCAPE processing; taken as
			// written it can only fail to match, never hide syntax.
			return token{kind: tokQuoted, text: src[at+1 : end-1]}, end, nil
		}
		return token{kind: tokString, text: src[i:end]}, end, nil
	}
	return token{kind: tokWord, text: w}, j, nil
}

// quotedEnd returns the offset just past the quoted run starting at i
// (src[i] == q), where a doubled quote stands for one, and with backslash
// escapes when escapes (E'…' strings).
//
// A backslash in a plain '…' string is refused: the server reads it as an
// escape when standard_conforming_strings is off (a setting of the
// server, the database, the role or the connection): there a backslash
// escapes the quote after it, so a string can end earlier than here, and
// what follows it would be read as SQL. E'…' reads the same under either
// setting.
func quotedEnd(src string, i int, q byte, escapes bool) (int, error) {
	for j := i + 1; j < len(src); j++ {
		switch {
		case escapes && src[j] == '\\':
			j++ // the next byte is escaped, whatever it is
		case q == '\'' && src[j] == '\\':
			return 0, fmt.Errorf("a backslash in the string starting at offset %d: the server may read it as an escape (standard_conforming_strings); write E'…' for escapes", i)
		case src[j] == q && j+1 < len(src) && src[j+1] == q:
			j++
		case src[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated quoted %s starting at offset %d", map[byte]string{'\'': "string", '"': "identifier"}[q], i)
}

// dollarQuoted returns the offset past the $tag$…$tag$ string at i.
func dollarQuoted(src string, i int) (int, error) {
	j := i + 1
	for j < len(src) && src[j] != '$' {
		if !isIdentChar(src[j]) || src[j] == '$' || (j == i+1 && isDigit(src[j])) {
			return 0, fmt.Errorf("unexpected $ at offset %d", i)
		}
		j++
	}
	if j >= len(src) {
		return 0, fmt.Errorf("unterminated dollar quote at offset %d", i)
	}
	tag := src[i : j+1]
	end := strings.Index(src[j+1:], tag)
	if end < 0 {
		return 0, fmt.Errorf("unterminated dollar-quoted string %s at offset %d", tag, i)
	}
	return j + 1 + end + len(tag), nil
}

// blockComment returns the offset past the (possibly nested) comment at i.
func blockComment(src string, i int) (int, error) {
	depth := 0
	for j := i; j+1 < len(src); j++ {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			depth++
			j++
		case src[j] == '*' && src[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated comment at offset %d", i)
}

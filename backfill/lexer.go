package backfill

import (
	"fmt"
	"strings"
)

// A small lexer for PostgreSQL expressions, enough to judge a
// --backfill-where predicate before any server sees it: where its strings,
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
}

// lexExpr splits src into tokens, dropping whitespace and comments.
func lexExpr(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(src[i:], "--"):
			end := strings.IndexAny(src[i:], "\n\r")
			if end < 0 {
				return out, nil
			}
			i += end
		case strings.HasPrefix(src[i:], "/*"):
			end, err := blockComment(src, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '\'':
			end, err := quotedEnd(src, i, '\'', false)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tokString, src[i:end]})
			i = end
		case c == '"':
			end, err := quotedEnd(src, i, '"', false)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tokQuoted, strings.ReplaceAll(src[i+1:end-1], `""`, `"`)})
			i = end
		case c == '$' && i+1 < len(src) && isDigit(src[i+1]):
			j := i + 1
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			out = append(out, token{tokParam, src[i:j]})
			i = j
		case c == '$':
			end, err := dollarQuoted(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tokString, src[i:end]})
			i = end
		case isIdentStart(c):
			t, end, err := word(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			i = end
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			j := i
			for j < len(src) && (isIdentChar(src[j]) || src[j] == '.' ||
				(src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E')) {
				j++
			}
			out = append(out, token{tokNumber, src[i:j]})
			i = j
		case strings.IndexByte("()[],;:.", c) >= 0:
			if c == ':' && i+1 < len(src) && src[i+1] == ':' {
				out = append(out, token{tokOp, "::"})
				i += 2
				continue
			}
			out = append(out, token{tokPunct, string(c)})
			i++
		case strings.IndexByte(opChars, c) >= 0:
			j := i
			for j < len(src) && strings.IndexByte(opChars, src[j]) >= 0 &&
				!strings.HasPrefix(src[j:], "--") && !strings.HasPrefix(src[j:], "/*") {
				j++
			}
			out = append(out, token{tokOp, src[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at offset %d", c, i)
		}
	}
	return out, nil
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
			return token{tokQuoted, src[at+1 : end-1]}, end, nil
		}
		return token{tokString, src[i:end]}, end, nil
	}
	return token{tokWord, w}, j, nil
}

// quotedEnd returns the offset just past the quoted run starting at i
// (src[i] == q), where a doubled quote stands for one, and with backslash
// escapes when escapes (E'…' strings).
func quotedEnd(src string, i int, q byte, escapes bool) (int, error) {
	for j := i + 1; j < len(src); j++ {
		switch {
		case escapes && src[j] == '\\':
			j++ // the next byte is escaped, whatever it is
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

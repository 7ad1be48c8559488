package sink

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The structured envelopes (cloudevents-structured, connect-json) are JSON
// documents built by appending into one []byte per record: no reflection,
// no intermediate map, one allocation for the value in the common case. The
// helpers here write JSON strings and decide what a payload is.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes what JSON requires
// ('"', '\\' and control characters), U+2028 and U+2029 (as encoding/json
// does, for JavaScript readers), and writes each byte that is not valid
// UTF-8 as \ufffd, so the output is always valid UTF-8 JSON; for valid
// input it is byte for byte what encoding/json writes with HTML escaping
// off.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		// At most utf8.UTFMax bytes are copied, on the stack.
		var rb [utf8.UTFMax]byte
		n := copy(rb[:], s[i:])
		r, size := utf8.DecodeRune(rb[:n])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendBase64 appends b as a JSON string holding its standard (RFC 4648,
// padded) base64 form: CloudEvents' data_base64 and Kafka Connect's bytes.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// validJSON says whether payload is one valid JSON value in valid UTF-8.
// Neither check allocates but for encoding/json's scanner, whose nesting
// it caps (10000 levels).
func validJSON(payload []byte) bool {
	return utf8.Valid(payload) && json.Valid(payload)
}

// compactLen is the size of payload without white space outside its
// strings: for valid JSON, the size of its compacted form; for any bytes,
// a lower bound of every form a structured envelope writes a payload in
// (a JSON string of it is at least its size, base64 a third more).
func compactLen(payload []byte) int {
	n, in := 0, false
	for i := 0; i < len(payload); i++ {
		switch c := payload[i]; {
		case in:
			n++
			if c == '\\' && i+1 < len(payload) {
				i++
				n++
			} else if c == '"' {
				in = false
			}
		case c == ' ', c == '\t', c == '\n', c == '\r':
		default:
			n++
			in = c == '"'
		}
	}
	return n
}

// appendCompacted appends valid JSON payload without its white space
// outside strings: what json.Compact writes.
func appendCompacted(dst, payload []byte) []byte {
	start, in := 0, false
	for i := 0; i < len(payload); i++ {
		switch c := payload[i]; {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == ' ', c == '\t', c == '\n', c == '\r':
			dst = append(dst, payload[start:i]...)
			start = i + 1
		case c == '"':
			in = true
		}
	}
	return append(dst, payload[start:]...)
}

// quotedLen is the size of appendString's output for s.
func quotedLen[S ~string | ~[]byte](s S) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b >= 0x20 && b != '"' && b != '\\':
				n++
			case b == '"', b == '\\', b == '\b', b == '\f', b == '\n', b == '\r', b == '\t':
				n += 2
			default:
				n += len(`\u0000`)
			}
			i++
			continue
		}
		var rb [utf8.UTFMax]byte
		r, size := utf8.DecodeRune(rb[:copy(rb[:], s[i:])])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += len(`\ufffd`)
		default:
			n += size
		}
		i += size
	}
	return n
}

// base64Len is the size of appendBase64's output for n bytes.
func base64Len(n int) int { return 2 + base64.StdEncoding.EncodedLen(n) }

// mediaType is the type/subtype of a content type, lower-cased, without
// its parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// isJSONType says whether a content type declares JSON: application/json,
// or a structured syntax suffix +json (RFC 6839).
func isJSONType(contentType string) bool {
	mt := mediaType(contentType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// isTextType says whether a content type declares text (text/*).
func isTextType(contentType string) bool {
	return strings.HasPrefix(mediaType(contentType), "text/")
}

// looksLikeDocument says whether a payload of a column that is not JSON
// (text, varchar, bytea) may hold a JSON document: its first byte that is
// not white space opens an object or an array. A bare 42 or "x" in a text
// column stays text.
func looksLikeDocument(payload []byte) bool {
	for _, c := range payload {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

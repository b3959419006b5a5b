// Package termtext makes text that comes from a cluster or a file safe to print on a terminal.
// A tenant's value reaches the operator's screen through a condition message, an API server's
// refusal quoting it, a controller's log; a control character in it (ESC [ 2J, ESC ] 0; … BEL,
// a carriage return) would let it erase, overwrite or forge what the operator reads. The
// printers escape such text where they print it, not where it is read: the data stays as the
// cluster holds it (JSON output carries it, escaped for JSON).
//
// What is escaped, into a visible form:
//   - C0 controls (U+0000–U+001F, newline, carriage return and tab included) and DEL as \xNN;
//   - C1 controls (U+0080–U+009F) as \u00NN: a terminal may act on them as on ESC sequences;
//   - bytes that are not UTF-8 as \xNN: in an 8-bit terminal 0x9b alone is a CSI;
//   - the Unicode bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: the
//     "Trojan Source" reorderings) and the line and paragraph separators U+2028, U+2029 as \uNNNN.
//
// Every escape is \x with two hex digits or \u with four, never the short forms (\n, \t): a
// literal backslash is left as it is, and text that holds paths and patterns ("C:\new", `\d+`)
// reads as itself; only text that literally spells \xNN or \uNNNN looks like an escape. Leaving
// backslashes alone makes escaping idempotent: text escaped by a printer and then wrapped in an
// error is escaped again where the error is printed, without its escapes being doubled.
//
// A multi-line message (a conclusion, a controller's error, a machine's stderr) is printed with
// Lines or Block: split at its newlines, each line escaped, every line after the first indented
// by the printer deeper than the line it continues, so that a newline in the data never starts a
// line that reads as one of the printer's own. A single-line field (a name, a reason, a row of a
// table) uses Line, which escapes newlines too. The error a command ends with is the one block
// whose newlines a printer cannot sort: it holds the messages it wraps with theirs. Its lines
// after the first are indented, so that the data's lines stay inside the error.
package termtext

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe tells whether a terminal (or an editor, for the bidi controls) would act on r instead
// of showing it; r is a decoded rune, invalid UTF-8 is handled by the callers.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidi controls
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// firstUnsafe is the index of the first byte of s that Line escapes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

// Line returns s with every character a terminal would act on replaced by its visible escape,
// newlines included: s prints as one line. It returns s itself when nothing needs escaping.
func Line(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Lines splits s at its newlines (a CRLF is one) and escapes each line with Line; a final
// newline ends the last line rather than starting an empty one.
func Lines(s string) []string {
	if strings.HasSuffix(s, "\n") {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i < len(lines)-1 {
			l = strings.TrimSuffix(l, "\r") // of a CRLF
		}
		lines[i] = Line(l)
	}
	return lines
}

// Block is s as lines escaped by Lines, every line after the first starting with indent: the
// way a printer shows a multi-line message under a line of its own.
func Block(s, indent string) string {
	if !strings.Contains(s, "\n") {
		return Line(s)
	}
	return strings.Join(Lines(s), "\n"+indent)
}

// EscapeJSON escapes in JSON text what encoding/json leaves raw and a terminal would act on:
// DEL, the C1 controls and the bidi controls become \u escapes, the same data once decoded
// (encoding/json escapes the C0 controls and the separators itself). data must be JSON, as
// encoding/json writes it: those characters can then only be inside its strings. It returns
// data itself when nothing needs escaping.
func EscapeJSON(data []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(data); {
		if data[i] < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		bad := r == utf8.RuneError && size == 1
		if !bad && !unsafe(r) {
			i += size
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(data)+16)
		}
		out = append(out, data[done:i]...)
		if bad {
			r = utf8.RuneError // what encoding/json makes of bytes that are not UTF-8
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		i += size
		done = i
	}
	if out == nil {
		return data
	}
	return append(out, data[done:]...)
}

// WriteJSON writes v as JSON (indented by indent, if not empty) and a newline, in one Write,
// with EscapeJSON's escapes: the form of every JSON output of the tool.
func WriteJSON(w io.Writer, v any, indent string) error {
	var data []byte
	var err error
	if indent == "" {
		data, err = json.Marshal(v)
	} else {
		data, err = json.MarshalIndent(v, "", indent)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(EscapeJSON(data), '\n'))
	return err
}

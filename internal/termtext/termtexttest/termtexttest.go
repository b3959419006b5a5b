// Package termtexttest is what the printers' tests feed them and check in what they print: a
// message carrying every control character a tenant can put into a cluster's text.
package termtexttest

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/termtext"
)

// Hostile is a message as a tenant can make one reach a printer (a condition message, an API
// server's refusal quoting a value): a screen clear, a window title set, a C1 CSI, a carriage
// return over the line, a bidi override and isolate, then every C0 and C1 control character
// and DEL, then a newline starting a line of its own. The attacks come first, so that they show
// where a printer cuts a long message.
func Hostile() string {
	var b strings.Builder
	b.WriteString("\x1b[2J\x1b]0;pwned\x07\u009b31m ok\roverwritten \u202edesrever\u2066 all:")
	for r := rune(0); r < 0xa0; r++ {
		if r < 0x20 || r >= 0x7f {
			b.WriteRune(r)
		}
	}
	b.WriteString("\n" + Forged)
	return b.String()
}

// Forged is the text Hostile puts after its last newline, as if it were a line of the printer.
const Forged = "forged: bootstrap complete"

// Visible are the escapes of Hostile's attacks a printer shows.
var Visible = []string{`\x1b[2J`, `\x1b]0;pwned\x07`, `\u009b31m`, `ok\x0doverwritten`, `\u202edesrever\u2066`}

// Check fails t when out, the output of a printer fed Hostile, holds a control character raw
// (other than the newlines that end its lines), lacks the visible escapes of the attacks, or
// starts a line of its own with Forged, at the left margin or the first indentation of a
// printer's lines (two spaces).
func Check(t testing.TB, what, out string) {
	t.Helper()
	check(t, what, out, 2)
}

// CheckBlock is Check for a block that is one message whatever its lines (the error a command
// ends with, which holds the messages it wraps with their newlines): the data may start a line
// inside the block, indented, never at the left margin.
func CheckBlock(t testing.TB, what, out string) {
	t.Helper()
	check(t, what, out, 0)
}

func check(t testing.TB, what, out string, margin int) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		// The attacks by name as well as by termtext's definition: a definition that lost one
		// must not pass its own check.
		if safe := termtext.Line(line); safe != line || strings.ContainsAny(line, "\x1b\x07\r\u009b\u202e\u2066") {
			t.Errorf("%s: line %d holds control characters raw: %s", what, i+1, safe)
		}
		if indent := len(line) - len(strings.TrimLeft(line, " ")); indent <= margin && strings.HasPrefix(line[indent:], Forged) {
			t.Errorf("%s: line %d is forged by the data: %q", what, i+1, line)
		}
	}
	for _, v := range Visible {
		if !strings.Contains(out, v) {
			t.Errorf("%s: the escape %s is not shown:\n%s", what, v, out)
		}
	}
}

package termtext_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/termtext"
)

func TestLineEscapesEveryControlCharacter(t *testing.T) {
	for r := rune(0); r < 0xa0; r++ {
		if r >= 0x20 && r < 0x7f {
			continue
		}
		in := "a" + string(r) + "b"
		want := fmt.Sprintf(`a\x%02xb`, r)
		if r >= 0x80 {
			want = fmt.Sprintf(`a\u%04xb`, r)
		}
		if got := termtext.Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"ok\rforged", `ok\x0dforged`},
		{"user\u202eexe.txt", `user\u202eexe.txt`},
		{"\u2066isolate\u2069 \u200f \u061c", `\u2066isolate\u2069 \u200f \u061c`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \x9b byte \xff", `bad \x9b byte \xff`},
		{`C:\new and \d+`, `C:\new and \d+`},
		{"ünïcödé ✓ 日本 ‖ …", "ünïcödé ✓ 日本 ‖ …"},
	} {
		if got := termtext.Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if twice := termtext.Line(termtext.Line(tc.in)); twice != tc.want {
			t.Errorf("Line twice of %q = %q: escaping is not idempotent", tc.in, twice)
		}
	}
}

func TestPlainTextIsReturnedAsIs(t *testing.T) {
	s := "unit cluster failed: ReconciliationFailed: kustomize build failed ✓"
	if allocs := testing.AllocsPerRun(100, func() { _ = termtext.Line(s) }); allocs != 0 {
		t.Errorf("Line of plain text allocates %v times", allocs)
	}
	data := []byte(`{"message":"plain ✓"}`)
	if allocs := testing.AllocsPerRun(100, func() { _ = termtext.EscapeJSON(data) }); allocs != 0 {
		t.Errorf("EscapeJSON of plain JSON allocates %v times", allocs)
	}
}

func TestBlockIndentsTheLinesOfData(t *testing.T) {
	got := termtext.Block("first\r\nsecond \x1b[31m\nthird\n", "    ")
	want := "first\n    second \\x1b[31m\n    third"
	if got != want {
		t.Errorf("Block = %q, want %q", got, want)
	}
	for in, want := range map[string]string{"one\rtwo": `one\x0dtwo`, "ends\r": `ends\x0d`} {
		if got := termtext.Lines(in); len(got) != 1 || got[0] != want {
			t.Errorf("Lines(%q) = %q: a carriage return is no line break but in a CRLF", in, got)
		}
	}
}

func TestWriteJSONKeepsTheDataAndNoRawControl(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0xa0; r++ {
		if r < 0x20 || r >= 0x7f {
			all.WriteRune(r)
		}
	}
	all.WriteString("\u202e\u2066\u2028")
	msg := all.String()
	var out bytes.Buffer
	if err := termtext.WriteJSON(&out, map[string]string{"message": msg}, ""); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "}\n") {
		t.Fatalf("not one line: %q", line)
	}
	if raw := termtext.Line(strings.TrimSuffix(line, "\n")); raw != strings.TrimSuffix(line, "\n") {
		t.Errorf("raw control characters in %q", line)
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["message"] != msg {
		t.Errorf("decoded %q (%v), want %q", back["message"], err, msg)
	}
	for _, want := range []string{`\u001b`, `\u007f`, `\u009b`, `\u202e`} {
		if !strings.Contains(line, want) {
			t.Errorf("%s missing in %s", want, line)
		}
	}
}

func BenchmarkLine(b *testing.B) {
	plain := strings.Repeat("unit cluster failed: ReconciliationFailed: kustomize build failed ", 4)
	hostile := plain + "\x1b[2J\r\u202e"
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = termtext.Line(plain)
		}
	})
	b.Run("escaped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = termtext.Line(hostile)
		}
	})
}

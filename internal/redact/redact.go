// Package redact hides secret values in everything the tool writes: messages, errors, progress
// lines, JSON events, rendered manifests and diagnostics. A secret is hidden in the forms it
// takes on its way out, not only verbatim: quoted as Go and JSON quote it, base64-encoded as in
// a Secret's data, and, for a multi-line secret (a clouds.yaml), line by line as CI systems mask
// multi-line secrets, so that a reformatted or escaped copy is hidden too.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// minSubstring is the length from which a secret is hidden wherever it appears; a shorter one
// is hidden where it stands alone (not inside a longer word), so that a two-letter secret does
// not eat every word that contains its letters.
const minSubstring = 4

// credentialKey matches the keys whose values are credentials.
var credentialKey = regexp.MustCompile(`(?i)secret|password|passwd|token|credential|private|key`)

// ageKey is the form of an age identity: hidden even when no one registered it.
var ageKey = regexp.MustCompile(`AGE-SECRET-KEY-1[0-9A-Z]+`)

// Redactor hides the values registered with Add. The zero value hides only age keys; it is safe
// for concurrent use.
type Redactor struct {
	mu     sync.RWMutex
	seen   map[string]bool
	long   []string
	short  []string
	tokens *regexp.Regexp
}

// New returns a Redactor hiding secrets.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secrets: empty strings are ignored.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	changed := false
	for _, s := range secrets {
		for _, form := range forms(s) {
			if form == "" || r.seen[form] {
				continue
			}
			r.seen[form] = true
			changed = true
			if len(form) >= minSubstring {
				r.long = append(r.long, form)
			} else {
				r.short = append(r.short, form)
			}
		}
	}
	if changed {
		r.compile()
	}
}

// forms are the ways a secret appears in output.
func forms(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	out := []string{s, strings.TrimSpace(s)}
	quoted := strconv.Quote(s)
	out = append(out, quoted[1:len(quoted)-1])
	if j, err := json.Marshal(s); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	out = append(out, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)))
	if strings.Contains(s, "\n") {
		for _, line := range strings.Split(s, "\n") {
			// A line that is only a key ("clouds:"), punctuation ("---", "{") or a comment
			// (an age key file's "# public key: age1...") holds nothing secret.
			if line = strings.TrimSpace(line); len(line) >= minSubstring && !strings.HasSuffix(line, ":") && !strings.HasPrefix(line, "#") && strings.IndexFunc(line, isAlnum) >= 0 {
				out = append(out, line)
				if k, v, ok := strings.Cut(line, ": "); ok {
					// The value of a "key: value" line is what a reformatted copy (JSON, flow
					// style) still carries: hidden when its key names a credential, or when it
					// is long enough not to be an ordinary word ("public", "3").
					v = strings.Trim(strings.TrimSpace(v), `"'`)
					if credentialKey.MatchString(k) || len(v) >= 8 {
						out = append(out, v)
					}
				}
			}
		}
	}
	return out
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// compile rebuilds the matchers.
func (r *Redactor) compile() {
	r.tokens = nil
	if len(r.short) > 0 {
		quoted := make([]string, len(r.short))
		for i, s := range r.short {
			quoted[i] = regexp.QuoteMeta(s)
		}
		r.tokens = regexp.MustCompile(`(^|[^A-Za-z0-9_])(` + strings.Join(quoted, "|") + `)($|[^A-Za-z0-9_])`)
	}
}

// maskAll replaces every place any of the secrets occupies, overlapping ones included (two
// secrets that share characters must not leave the rest of either visible), by one Mask per run.
func maskAll(s string, secrets []string) string {
	var masked []bool
	for _, secret := range secrets {
		for from := 0; from < len(s); {
			i := strings.Index(s[from:], secret)
			if i < 0 {
				break
			}
			if masked == nil {
				masked = make([]bool, len(s))
			}
			for j := from + i; j < from+i+len(secret); j++ {
				masked[j] = true
			}
			from += i + 1
		}
	}
	if masked == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !masked[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString(Mask)
		for i+1 < len(s) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// String returns s with every secret hidden.
func (r *Redactor) String(s string) string {
	if r != nil {
		r.mu.RLock()
		s = maskAll(s, r.long)
		if r.tokens != nil {
			// Twice: adjacent matches share the delimiter between them.
			for range 2 {
				s = r.tokens.ReplaceAllString(s, "${1}"+Mask+"${3}")
			}
		}
		r.mu.RUnlock()
	}
	return ageKey.ReplaceAllString(s, Mask)
}

// Error returns err with its message redacted; errors.Is and errors.As still see the original.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// IsRedacted reports whether err's message was changed by a Redactor.
func IsRedacted(err error) bool {
	var r *redactedError
	return errors.As(err, &r)
}

// Writer returns a writer that hides the secrets in what is written to w. Each Write is
// redacted on its own: writers of lines (the progress printers, the YAML printer) write a line
// or a document per call.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{r: r, w: w} }

type writer struct {
	r *Redactor
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.r.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// quoted are the snippets of content a parser's message quotes (`x`, "x", 'x').
var quoted = regexp.MustCompile("`[^`]*`|\"[^\"]*\"|'[^']*'")

// Quoted removes what a parser's message quotes of the content it read, for the messages of a
// secret file's parser (YAML, SOPS): its position stays, its content goes.
func Quoted(msg string) string {
	return quoted.ReplaceAllString(msg, "(content not shown: secret file)")
}

// Package versions reads tools/versions.env, the single file that pins every version cluster-init
// vendors, builds or deploys by default.
package versions

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// File is the path of the pins, relative to the repository root.
const File = "tools/versions.env"

var keyPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// Pins maps a pin name (KUBERNETES_VERSION, ...) to its value.
type Pins map[string]string

// Load reads the pins of the repository rooted at root.
func Load(root string) (Pins, error) {
	path := filepath.Join(root, File)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read version pins: %w", err)
	}
	return Parse(path, data)
}

// Parse reads KEY=value lines; blank lines and lines starting with '#' are ignored. name is only
// used in errors.
func Parse(name string, data []byte) (Pins, error) {
	pins := Pins{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || !keyPattern.MatchString(key) || value == "" {
			return nil, fmt.Errorf("%s:%d: expected KEY=value with an upper-case KEY, got %q", name, n, line)
		}
		if _, dup := pins[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s is pinned twice", name, n, key)
		}
		pins[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return pins, nil
}

// Get returns the value of a pin, or an error naming the file when it is missing.
func (p Pins) Get(key string) (string, error) {
	v, ok := p[key]
	if !ok {
		return "", fmt.Errorf("%s: no pin %s", File, key)
	}
	return v, nil
}

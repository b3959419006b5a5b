package progress

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/mattn/go-runewidth"

	"cluster-init.dev/cluster-init/internal/readiness"
)

// terminal is the part of a terminal the tty printer relies on: rows that wrap at the width,
// cursor up (ESC [ n A) no higher than the top of the screen, erase below (ESC [ J).
type terminal struct {
	width, height int
	rows          []string
	row, col      int
}

func (t *terminal) Write(p []byte) (int, error) {
	s := string(p)
	for len(s) > 0 {
		if strings.HasPrefix(s, "\x1b[") {
			end := strings.IndexAny(s, "AJ")
			arg, cmd := s[2:end], s[end]
			s = s[end+1:]
			switch cmd {
			case 'A':
				n, _ := strconv.Atoi(arg)
				top := max(len(t.rows)-t.height, 0)
				t.row = max(t.row-n, top)
				t.col = 0
			case 'J':
				t.rows = t.rows[:t.row+1]
				t.rows[t.row] = runewidth.Truncate(t.rows[t.row], t.col, "")
			}
			continue
		}
		r := []rune(s)[0]
		s = s[len(string(r)):]
		if r == '\n' {
			t.row, t.col = t.row+1, 0
			t.ensure()
			continue
		}
		if t.col+runewidth.RuneWidth(r) > t.width {
			t.row, t.col = t.row+1, 0
			t.ensure()
		}
		t.ensure()
		t.rows[t.row] += string(r)
		t.col += runewidth.RuneWidth(r)
	}
	return len(p), nil
}

func (t *terminal) ensure() {
	for len(t.rows) <= t.row {
		t.rows = append(t.rows, "")
	}
}

// On a terminal of any width, however long a condition line is, each redraw replaces the
// previous frame: the screen never holds two unit trees, and the region follows a resize.
func TestTerminalRedrawLeavesNoStaleFrames(t *testing.T) {
	long := "Cluster management: Provisioned; Available=False (NotAvailable: RemoteConnectionProbe: Remote connection not established yet, " + strings.Repeat("and more detail ", 12) + ")"
	for _, size := range [][2]int{{80, 24}, {200, 50}, {40, 12}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			term := &terminal{width: size[0], height: size[1]}
			width, height := size[0], size[1]
			t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
			p, err := New(term, TTY, func() (int, int) { return width, height }, t0, nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewTracker(t0)
			p.Phase("units")
			for i := range 6 {
				obs := Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
					"cert-manager": ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "ok"),
					"capi":         ks("capi", 1, 1, "Unknown", "Progressing", "Reconciliation in progress "+long),
				}}, Details: map[string][]string{"capi": {long, "a message\nof three\tlines\n" + long}}}
				p.Units(tr.Update(obs, t0.Add(time.Duration(i)*time.Second)))
				p.Log("message %d", i)
				if i == 3 { // the user narrows the window
					width = width / 2
				}
			}
			screen := strings.Join(term.rows, "\n")
			if n := strings.Count(screen, "units: 1/5 ready"); n != 1 {
				t.Errorf("the screen holds %d unit trees:\n%s", n, screen)
			}
			for i := range 6 {
				if !strings.Contains(screen, fmt.Sprintf("message %d", i)) {
					t.Errorf("message %d was overwritten:\n%s", i, screen)
				}
			}
		})
	}
}

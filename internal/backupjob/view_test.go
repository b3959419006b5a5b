package backupjob_test

import (
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
)

// What status says of the backups: the last one and its age; a failure since; a last backup older
// than twice the schedule's period; a namespace left out.
func TestStatusSaysWhenTheBackupsStopped(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ok := &backupjob.Attempt{Key: "e/20261202T110000Z-schedule.tar.gz.age", Size: 2048, Finished: now.Add(-30 * time.Minute)}
	old := &backupjob.Attempt{Key: "e/20261202T080000Z-schedule.tar.gz.age", Size: 2048, Finished: now.Add(-4 * time.Hour)}
	failed := &backupjob.Attempt{Reason: "schedule", Finished: now.Add(-5 * time.Minute), Message: "store: connection refused"}
	for _, tc := range []struct {
		name     string
		status   backupjob.Status
		line     string
		troubles []string
	}{
		{"fresh", backupjob.Status{LastSuccess: ok}, "last e/20261202T110000Z-schedule.tar.gz.age, 2.0 KiB, 30m0s ago", nil},
		{"none yet", backupjob.Status{}, "no backup written yet", nil},
		{"failing and stale", backupjob.Status{LastSuccess: old, LastFailure: failed}, "4h0m0s ago",
			[]string{"older than twice the schedule's period (1h0m0s)", "failed 5m0s ago (schedule): store: connection refused"}},
		{"a failure before the last success", backupjob.Status{LastSuccess: ok, LastFailure: &backupjob.Attempt{Finished: now.Add(-2 * time.Hour), Message: "x"}}, "30m0s ago", nil},
		{"a namespace left out", backupjob.Status{LastSuccess: &backupjob.Attempt{Key: "k", Finished: now, Skipped: []backup.Namespace{{Name: "team-b", Skipped: "cluster x is paused"}}}}, "last k",
			[]string{"namespace team-b is not in the last backup: cluster x is paused"}},
	} {
		line, troubles := backupjob.View{Found: true, Schedule: "0 * * * *", Status: tc.status}.Summary(now)
		if !strings.HasPrefix(line, "backups: 0 * * * *; ") || !strings.Contains(line, tc.line) {
			t.Errorf("%s: %q, want it to hold %q", tc.name, line, tc.line)
		}
		if len(troubles) != len(tc.troubles) {
			t.Errorf("%s: troubles %q, want %q", tc.name, troubles, tc.troubles)
			continue
		}
		for i := range troubles {
			if !strings.Contains(troubles[i], tc.troubles[i]) {
				t.Errorf("%s: trouble %q, want %q", tc.name, troubles[i], tc.troubles[i])
			}
		}
	}
	if line, _ := (backupjob.View{}).Summary(now); line != "" {
		t.Errorf("no backup unit: %q", line)
	}
}

package backup_test

import (
	"slices"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/backup"
)

func TestBackupNamesAreReadBack(t *testing.T) {
	at := time.Date(2026, 12, 1, 22, 5, 9, 0, time.FixedZone("CET", 3600))
	key := backup.Key("kubeadm-capd", at, backup.ReasonBeforeChange)
	if key != "kubeadm-capd/20261201T210509Z-before-change.tar.gz.age" {
		t.Errorf("key %q", key)
	}
	e, ok := backup.ParseKey(key, 42)
	if !ok || e.Environment != "kubeadm-capd" || !e.Created.Equal(at) || e.Reason != backup.ReasonBeforeChange || e.Size != 42 {
		t.Errorf("parsed %+v %v", e, ok)
	}
	for _, other := range []string{"kubeadm-capd/notes.txt", "kubeadm-capd/20261201T210509Z-whatever.tar.gz.age", "../x/20261201T210509Z-schedule.tar.gz.age", "kubeadm-capd/sub/20261201T210509Z-schedule.tar.gz.age"} {
		if _, ok := backup.ParseKey(other, 1); ok {
			t.Errorf("%q read as a backup", other)
		}
	}
}

func TestRetentionKeepsTheNewestAndRemovesTheOld(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var entries []backup.Entry
	for h := range 10 { // one an hour, the newest first: 12:00, 11:00 ... 03:00
		e, _ := backup.ParseKey(backup.Key("e", now.Add(-time.Duration(h)*time.Hour), backup.ReasonSchedule), 1)
		entries = append(entries, e)
	}
	hours := func(es []backup.Entry) []int {
		var out []int
		for _, e := range es {
			out = append(out, e.Created.Hour())
		}
		return out
	}
	for _, tc := range []struct {
		r    backup.Retention
		want []int
	}{
		{backup.Retention{Keep: 3}, []int{3, 4, 5, 6, 7, 8, 9}},
		{backup.Retention{Keep: 3, MaxAge: 5 * time.Hour}, []int{3, 4, 5, 6}},
		{backup.Retention{Keep: 8, MaxAge: time.Hour}, []int{3, 4}},
		{backup.Retention{Keep: 0, MaxAge: time.Minute}, []int{3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{backup.Retention{Keep: 20, MaxAge: time.Minute}, nil},
	} {
		if got := hours(tc.r.Expired(entries, now)); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: removes hours %v, want %v", tc.r, got, tc.want)
		}
	}
	// Far past every age, the newest stays, whatever Keep says.
	for _, keep := range []int{0, 1} {
		if got := (backup.Retention{Keep: keep, MaxAge: time.Hour}).Expired(entries, now.Add(1000*time.Hour)); len(got) != 9 {
			t.Errorf("keep %d, past every age: %d removed, want all but the newest (9)", keep, len(got))
		}
	}
	if e, err := backup.Find(entries, ""); err != nil || e.Created.Hour() != 12 {
		t.Errorf("the latest: %+v %v", e, err)
	}
	if e, err := backup.Find(entries, "20261201T0500"); err != nil || e.Created.Hour() != 5 {
		t.Errorf("by time: %+v %v", e, err)
	}
	if _, err := backup.Find(entries, "20261201T"); err == nil {
		t.Error("a name of many backups was taken")
	}
	if _, err := backup.Find(nil, "latest"); err == nil {
		t.Error("the latest of none")
	}
}

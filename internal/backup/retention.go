package backup

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Entry is one backup in the store, as its name and the store's listing say.
type Entry struct {
	// Key is its name in the bucket: <environment>/<time>-<reason>.tar.gz.age.
	Key         string
	Environment string
	Created     time.Time
	Reason      string
	Size        int64
}

// Suffix ends every backup's name: what it is made of.
const Suffix = ".tar.gz.age"

// timeLayout is the time in a backup's name: sortable, without characters a store or a shell
// would mind.
const timeLayout = "20060102T150405Z"

// Key is the name in the bucket of environment env's backup taken at created for reason.
func Key(env string, created time.Time, reason string) string {
	return fmt.Sprintf("%s/%s-%s%s", env, created.UTC().Format(timeLayout), reason, Suffix)
}

var keyPattern = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([0-9]{8}T[0-9]{6}Z)-(schedule|before-change|on-demand)` + regexp.QuoteMeta(Suffix) + `$`)

// ParseKey reads a backup's name; ok is false for any other object of the bucket.
func ParseKey(key string, size int64) (Entry, bool) {
	m := keyPattern.FindStringSubmatch(key)
	if m == nil {
		return Entry{}, false
	}
	t, err := time.Parse(timeLayout, m[3])
	if err != nil {
		return Entry{}, false
	}
	return Entry{Key: key, Environment: m[1], Created: t, Reason: m[4], Size: size}, true
}

// Prefix is where environment env's backups are in the bucket.
func Prefix(env string) string { return env + "/" }

// Retention is how many backups are kept and for how long.
type Retention struct {
	// Keep is how many of the newest are kept whatever their age (at least one).
	Keep int
	// MaxAge: older ones than this go, but for the Keep newest.
	MaxAge time.Duration
}

// Expired are the backups retention removes, oldest first: those past the Keep newest that are
// older than MaxAge, or past Keep when MaxAge is 0. The newest is never one of them, so that a
// store a schedule stopped writing to still holds the last backup.
func (r Retention) Expired(entries []Entry, now time.Time) []Entry {
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Created.After(sorted[j].Created) })
	keep := max(r.Keep, 1)
	var out []Entry
	for i, e := range sorted {
		if i < keep {
			continue
		}
		if r.MaxAge > 0 && now.Sub(e.Created) <= r.MaxAge {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Latest is the newest backup of entries, and whether there is one.
func Latest(entries []Entry) (Entry, bool) {
	var latest Entry
	for _, e := range entries {
		if e.Created.After(latest.Created) {
			latest = e
		}
	}
	return latest, !latest.Created.IsZero()
}

// Find is the backup named by from: its whole key, its name without the environment's prefix, or
// the time in its name; "" or "latest": the newest.
func Find(entries []Entry, from string) (Entry, error) {
	if from == "" || from == "latest" {
		if e, ok := Latest(entries); ok {
			return e, nil
		}
		return Entry{}, fmt.Errorf("no backup in the store")
	}
	var found []Entry
	for _, e := range entries {
		name := strings.TrimPrefix(e.Key, Prefix(e.Environment))
		if e.Key == from || name == from || strings.HasPrefix(name, from) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return Entry{}, fmt.Errorf("no backup named %q in the store (bootstrap backup list shows them)", from)
	case 1:
		return found[0], nil
	}
	return Entry{}, fmt.Errorf("%q names %d backups: give more of the name", from, len(found))
}

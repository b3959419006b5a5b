package cloud

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// object is one resource as the API shows it: OpenStack's APIs filter lists by a resource's
// top-level fields, so keeping resources as their JSON objects makes one filter serve them all.
type object map[string]any

func (o object) str(key string) string {
	v, _ := o[key].(string)
	return v
}

func (o object) strings(key string) []string {
	switch v := o[key].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// clone is a deep copy through JSON: what a handler returns can never alias the store.
func (o object) clone() object {
	data, err := json.Marshal(o)
	if err != nil {
		panic(fmt.Sprintf("marshal a stored object: %v", err))
	}
	var out object
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("unmarshal a stored object: %v", err))
	}
	return out
}

// table holds the resources of one kind in the order they were created, as OpenStack lists them.
type table struct {
	ids  []string
	byID map[string]object
}

func newTable() *table { return &table{byID: map[string]object{}} }

func (t *table) put(o object) {
	id := o.str("id")
	if _, ok := t.byID[id]; !ok {
		t.ids = append(t.ids, id)
	}
	t.byID[id] = o
}

func (t *table) get(id string) (object, bool) {
	o, ok := t.byID[id]
	return o, ok
}

func (t *table) remove(id string) {
	delete(t.byID, id)
	t.ids = slices.DeleteFunc(t.ids, func(s string) bool { return s == id })
}

func (t *table) all() []object {
	out := make([]object, 0, len(t.ids))
	for _, id := range t.ids {
		out = append(out, t.byID[id])
	}
	return out
}

func (t *table) len() int { return len(t.ids) }

// listQuery keys that page or shape a list rather than filter it.
var notFilters = map[string]bool{
	"limit": true, "marker": true, "page_reverse": true, "sort_key": true, "sort_dir": true,
	"fields": true, "sort": true,
}

// matches applies OpenStack's list filters: a field equals the value (one of several values when
// repeated), tags (all of them), tags-any, not-tags, not-tags-any; fixed_ips as Neutron reads it
// (ip_address=…, subnet_id=…). A field the object lacks never matches, as in Neutron.
func matches(o object, q url.Values) bool {
	for key, values := range q {
		if notFilters[key] || len(values) == 0 {
			continue
		}
		switch key {
		case "tags", "tags-any", "not-tags", "not-tags-any":
			if !matchTags(o.strings("tags"), key, values) {
				return false
			}
			continue
		case "fixed_ips":
			if !matchFixedIPs(o, values) {
				return false
			}
			continue
		}
		v, ok := o[key]
		if !ok {
			return false
		}
		_, isBool := v.(bool)
		if !slices.ContainsFunc(values, func(want string) bool {
			// Neutron takes a boolean as true or True; everything else exactly.
			return want == scalar(v) || (isBool && strings.EqualFold(want, scalar(v)))
		}) {
			return false
		}
	}
	return true
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	default:
		data, _ := json.Marshal(x)
		return string(data)
	}
}

func matchTags(have []string, key string, values []string) bool {
	var want []string
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if t != "" {
				want = append(want, t)
			}
		}
	}
	hasAll, hasAny := true, false
	for _, w := range want {
		if slices.Contains(have, w) {
			hasAny = true
		} else {
			hasAll = false
		}
	}
	switch key {
	case "tags":
		return hasAll
	case "tags-any":
		return hasAny
	case "not-tags":
		return !hasAll || len(want) == 0
	default: // not-tags-any
		return !hasAny
	}
}

func matchFixedIPs(o object, values []string) bool {
	ips, _ := o["fixed_ips"].([]any)
	for _, v := range values {
		k, want, ok := strings.Cut(v, "=")
		if !ok {
			return false
		}
		found := false
		for _, ip := range ips {
			m, _ := ip.(map[string]any)
			if s, _ := m[k].(string); s == want {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// newID is a random UUID (version 4), the form every OpenStack ID here takes.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random bytes: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

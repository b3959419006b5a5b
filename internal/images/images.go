// Package images lists the container images a set of objects makes nodes pull: the containers,
// init containers and ephemeral containers of every pod template.
package images

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Use is one image and what uses it.
type Use struct {
	Image string
	// Users are "Kind namespace/name" of the objects running it, sorted.
	Users []string
}

// podSpecPaths are where workload kinds keep their pod spec.
var podSpecPaths = map[string][]string{
	"Pod":         {"spec"},
	"Deployment":  {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

// FromObjects returns the images of the pod templates among objs, sorted by image.
func FromObjects(objs []*unstructured.Unstructured) []Use {
	users := map[string]map[string]bool{}
	for _, o := range objs {
		path, ok := podSpecPaths[o.GetKind()]
		if !ok {
			continue
		}
		spec, found, _ := unstructured.NestedMap(o.Object, path...)
		if !found {
			continue
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			list, _, _ := unstructured.NestedSlice(spec, field)
			for _, c := range list {
				m, _ := c.(map[string]any)
				img, _ := m["image"].(string)
				if img == "" {
					continue
				}
				if users[img] == nil {
					users[img] = map[string]bool{}
				}
				users[img][fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())] = true
			}
		}
	}
	return toUses(users)
}

// Add records an image used by something that is not a pod template (a node image, say).
func Add(uses []Use, image, user string) []Use {
	m := map[string]map[string]bool{}
	for _, u := range uses {
		m[u.Image] = map[string]bool{}
		for _, x := range u.Users {
			m[u.Image][x] = true
		}
	}
	if m[image] == nil {
		m[image] = map[string]bool{}
	}
	m[image][user] = true
	return toUses(m)
}

func toUses(m map[string]map[string]bool) []Use {
	out := make([]Use, 0, len(m))
	for img, us := range m {
		u := Use{Image: img}
		for x := range us {
			u.Users = append(u.Users, x)
		}
		sort.Strings(u.Users)
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}

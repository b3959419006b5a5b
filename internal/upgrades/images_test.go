package upgrades

import "testing"

// Image references split at the tag, not at a registry's port or a digest; containers are
// paired by image name.
func TestADowngradeIsFoundByImageName(t *testing.T) {
	for _, tc := range []struct{ image, name, tag string }{
		{"registry.example/capi:v1.14.0", "registry.example/capi", "v1.14.0"},
		{"registry.example:5000/capi:v1.14.0", "registry.example:5000/capi", "v1.14.0"},
		{"registry.example:5000/capi", "registry.example:5000/capi", ""},
		{"registry.example/capi:v1.14.0@sha256:0123", "registry.example/capi", "v1.14.0"},
		{"registry.example/capi@sha256:0123", "registry.example/capi", ""},
	} {
		if name, tag := splitTag(tc.image); name != tc.name || tag != tc.tag {
			t.Errorf("splitTag(%q) = %q, %q; want %q, %q", tc.image, name, tag, tc.name, tc.tag)
		}
	}
	for _, tc := range []struct {
		running, checkout []string
		refused           bool
	}{
		{[]string{"r/manager:v1.14.0"}, []string{"r/manager:v1.13.4"}, true},
		{[]string{"r/manager:v1.13.4"}, []string{"r/manager:v1.14.0"}, false},
		// A sidecar added in front of the manager: still its manager's downgrade.
		{[]string{"r/manager:v1.14.0"}, []string{"r/proxy:v0.1.0", "r/manager:v1.13.4"}, true},
		// Tags without the v.
		{[]string{"r/controller:1.11.5"}, []string{"r/controller:1.10.2"}, true},
		// Another image: not comparable.
		{[]string{"r/manager:v1.14.0"}, []string{"other/manager:v1.13.4"}, false},
	} {
		if got := downgrade(tc.running, tc.checkout) != ""; got != tc.refused {
			t.Errorf("downgrade(%v, %v) refused=%v, want %v", tc.running, tc.checkout, got, tc.refused)
		}
	}
}

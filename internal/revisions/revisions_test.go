package revisions

import "testing"

func TestARevisionSaysWhatItRunsAndWhatItIsBehind(t *testing.T) {
	for _, c := range []struct {
		rev  Revision
		want string
	}{
		{Revision{}, ""},
		{Revision{Applied: "main@sha1:0123456789abcdef"}, "main@0123456"},
		{Revision{Applied: "main@sha1:0123456789abcdef", Source: "main@sha1:0123456789abcdef"}, "main@0123456"},
		{Revision{Applied: "main@sha1:0123456789abcdef", Source: "main@sha1:fedcba9876543210"}, "main@0123456, behind main@fedcba9"},
		{Revision{Source: "main@sha1:fedcba9876543210"}, "none applied yet, main@fedcba9 fetched"},
		{Revision{Applied: "sha256:abcdef0123456789"}, "abcdef0"},
		{Revision{Applied: "v1.2.3@sha256:abcdef0123456789"}, "v1.2.3@abcdef0"},
		{Revision{Applied: "1.0.0"}, "1.0.0"},
		{Revision{Applied: "main@sha1:0123456789abcdef", Unread: "forbidden"}, "main@0123456 (its source: forbidden)"},
	} {
		if got := c.rev.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.rev, got, c.want)
		}
	}
}

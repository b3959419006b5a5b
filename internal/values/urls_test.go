package values

import (
	"strings"
	"testing"
)

func TestURLsAreParsedAsTheirControllersWill(t *testing.T) {
	for _, c := range []struct {
		raw     string
		schemes []string
		want    string // "" when valid, else a part of the problem
	}{
		{"https://git.example.invalid/repo.git", httpSchemes, ""},
		{"ssh://git@git.example.invalid:2222/repo.git", sourceSchemes["git"], ""},
		{"oci://cluster-init-registry:5000/cluster-init", sourceSchemes["oci"], ""},
		{"http://[fd00::1]:5000/v2", httpSchemes, ""},
		{"http://10.0.0.1:65535", httpSchemes, ""},
		{"http://internal_host.example.invalid", httpSchemes, ""},
		{"https://", httpSchemes, "no host"},
		{"https:git.example.invalid", httpSchemes, "no host"},
		{"git.example.invalid/repo", httpSchemes, "no scheme"},
		{"ftp://git.example.invalid/repo", httpSchemes, `scheme "ftp"`},
		{"https://git.example.invalid:0/x", httpSchemes, `port "0"`},
		{"https://git.example.invalid:65536/x", httpSchemes, `port "65536"`},
		{"https://git.example.invalid:/x", httpSchemes, "a colon without a port"},
		{"https://git.example.invalid:https/x", httpSchemes, "not a URL"},
		{"https://user:12/3@host/x", httpSchemes, "an @ after the host"},
		{"https://-bad-.example.invalid/x", httpSchemes, "expected a DNS name"},
		{"https://a..b/x", httpSchemes, "expected a DNS name"},
		{"https://999.1.1.1/x", httpSchemes, "not an IP address"},
		{"http://[fd00::1/v2", httpSchemes, "not a URL"},
		{"http://[zz::1]:5000/v2", httpSchemes, "not a URL"},
		{"https://git.example.invalid/a b", httpSchemes, "position 30"},
		{"https://git.example.invalid/\x01", httpSchemes, "control character"},
	} {
		got := urlProblem(c.raw, c.schemes)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("urlProblem(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// A URL may carry a token in its user information or query: a problem never quotes it.
func TestAURLProblemQuotesNoUserInformationNorQuery(t *testing.T) {
	for _, raw := range []string{
		"https://bob:s3cr3t@git.example.invalid:99999/x",
		"https://git.example.invalid:99999/x?token=s3cr3t",
		"ftp://bob:s3cr3t@git.example.invalid/x",
		"https://bob:s3cr3t@:5000/x",
		"http://user:s3cr3t?et@proxy:3128",
		"https://user:s3cr3t/cd@h/x",
		"https://user:s3cr3t#x@h/x",
		"https://user:12/s3cr3t@host/x",
	} {
		got := urlProblem(raw, httpSchemes)
		if got == "" || strings.Contains(got, "s3cr3t") {
			t.Errorf("urlProblem(%q) = %q: want a problem without the secret", raw, got)
		}
	}
}

package values

import (
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

func TestOpenStackAuthProblems(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, c := range []struct {
		name, cloud string
		want        []string // one substring per expected problem, in order
	}{
		{"application credential", "auth: {auth_url: https://k:5000/v3, application_credential_id: id, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", nil},
		{"application credential by name, user by ID", "auth: {auth_url: https://k:5000/v3, application_credential_name: n, user_id: u, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", nil},
		{"password, names with domains", "auth: {auth_url: https://k:5000/v3, username: u, password: s3cr3t-value, user_domain_name: Default, project_name: p, project_domain_name: Default}", nil},
		{"password, IDs", "auth: {auth_url: https://k:5000/v3, user_id: u, password: s3cr3t-value, project_id: p}\nauth_type: password", nil},
		{"token", "auth: {auth_url: https://k:5000/v3, token: s3cr3t-value, project_id: p}\nauth_type: v3token", nil},
		{"no auth", "auth_type: password", []string{"auth: missing"}},
		{"no auth_url", "auth: {application_credential_id: id, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", []string{"auth.auth_url: missing"}},
		{"auth_url not a URL", "auth: {auth_url: 'keystone:5000', application_credential_id: id, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", []string{"auth.auth_url: expected an http(s) URL"}},
		{"application credential without secret", "auth: {auth_url: https://k:5000/v3, application_credential_id: id, application_credential_secret: ''}\nauth_type: v3applicationcredential", []string{"auth.application_credential_secret: missing"}},
		{"application credential without ID or name", "auth: {auth_url: https://k:5000/v3, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", []string{"auth.application_credential_id: missing"}},
		{"application credential by name without user", "auth: {auth_url: https://k:5000/v3, application_credential_name: n, application_credential_secret: s3cr3t-value}\nauth_type: v3applicationcredential", []string{"auth.user_id: missing"}},
		{"password without password, domains or project", "auth: {auth_url: https://k:5000/v3, username: u}", []string{"auth.password: missing", "auth.user_domain_name: missing", "auth.project_id: missing"}},
		{"password with project name, no domain", "auth: {auth_url: https://k:5000/v3, user_id: u, password: s3cr3t-value, project_name: p}", []string{"auth.project_domain_name: missing"}},
		{"token without token", "auth: {auth_url: https://k:5000/v3, project_id: p}\nauth_type: token", []string{"auth.token: missing"}},
		{"unknown auth_type", "auth: {auth_url: https://k:5000/v3}\nauth_type: s3cr3t-value", []string{"auth_type: not one CAPO can use"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cloud := map[string]any{}
			if err := yamlv3.Unmarshal([]byte(c.cloud), &cloud); err != nil {
				t.Fatal(err)
			}
			got := openstackAuthProblems(cloud)
			if len(got) != len(c.want) {
				t.Fatalf("problems %q, want %d: %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q, want %q in it", i, got[i], w)
				}
			}
			if strings.Contains(strings.Join(got, "\n"), secret) {
				t.Errorf("a problem quotes a value of the clouds.yaml: %q", got)
			}
		})
	}
}

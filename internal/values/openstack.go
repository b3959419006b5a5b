package values

import (
	"strings"
)

// openstackAuthProblems says what a cloud of a clouds.yaml lacks for CAPO to authenticate with
// it, as Keystone's plugins read it (gophercloud's clientconfig, which CAPO uses): an auth_url,
// the credentials of its auth_type and a project to work in. Each problem names the key inside
// the cloud, never its value.
func openstackAuthProblems(cloud map[string]any) []string {
	auth, _ := cloud["auth"].(map[string]any)
	if auth == nil {
		return []string{"auth: missing: expected a map with auth_url and the credentials of its auth_type"}
	}
	var problems []string
	missing := func(what string) {
		problems = append(problems, "auth."+what)
	}
	has := func(key string) bool {
		s, ok := auth[key].(string)
		return ok && strings.TrimSpace(s) != ""
	}
	anyOf := func(keys ...string) bool {
		for _, k := range keys {
			if has(k) {
				return true
			}
		}
		return false
	}

	if !has("auth_url") {
		missing("auth_url: missing: expected the Keystone URL, https://host:5000/v3")
	} else if urlProblem(auth["auth_url"].(string), httpSchemes) != "" {
		// Not urlProblem's text: it quotes the host, and this is the secrets file.
		missing("auth_url: expected an http(s) URL with a host and a port from 1 to 65535, as https://host:5000/v3")
	}
	userDomain := func() {
		if has("username") && !has("user_id") && !anyOf("user_domain_name", "user_domain_id", "domain_name", "domain_id") {
			missing("user_domain_name: missing: expected the domain of username (or user_domain_id, or user_id instead of username)")
		}
	}
	project := func() {
		switch {
		case anyOf("project_id", "tenant_id"):
		case anyOf("project_name", "tenant_name"):
			if !anyOf("project_domain_name", "project_domain_id", "domain_name", "domain_id") {
				missing("project_domain_name: missing: expected the domain of project_name (or project_domain_id, or project_id instead)")
			}
		default:
			missing("project_id: missing: expected the project the machines are created in (or project_name with its domain)")
		}
	}

	authType, _ := cloud["auth_type"].(string)
	switch authType {
	case "", "password", "v3password", "v2password":
		if !anyOf("username", "user_id") {
			missing("username: missing: expected username or user_id for auth_type password")
		}
		if !has("password") {
			missing("password: missing: expected the password of the user for auth_type password")
		}
		userDomain()
		project()
	case "v3applicationcredential", "applicationcredential":
		// An application credential is scoped to its project already.
		if !has("application_credential_secret") {
			missing("application_credential_secret: missing: expected the secret of the application credential")
		}
		if !has("application_credential_id") {
			if !has("application_credential_name") {
				missing("application_credential_id: missing: expected the ID of the application credential (or its name with the user)")
			} else if !anyOf("username", "user_id") {
				missing("user_id: missing: an application credential given by name needs its user (user_id, or username with its domain)")
			} else {
				userDomain()
			}
		}
	case "token", "v3token", "v2token":
		if !has("token") {
			missing("token: missing: expected a Keystone token for auth_type " + authType)
		}
		project()
	default:
		// Not quoted: the file is a secret as a whole.
		problems = append(problems, "auth_type: not one CAPO can use: expected password, v3applicationcredential or token")
	}
	return problems
}

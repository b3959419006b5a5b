package cloud

import (
	"crypto/subtle"
	"net/http"
	"time"
)

// tokenLifetime is Keystone's default.
const tokenLifetime = time.Hour

func (c *Cloud) identityRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /identity/{$}", c.identityVersions)
	mux.HandleFunc("GET /identity/v3", c.identityVersion)
	mux.HandleFunc("GET /identity/v3/{$}", c.identityVersion)
	mux.HandleFunc("POST /identity/v3/auth/tokens", c.issueToken)
	mux.HandleFunc("GET /identity/v3/auth/tokens", c.guarded(c.validateToken))
	mux.HandleFunc("HEAD /identity/v3/auth/tokens", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		if c.tokenOf(r.Header.Get("X-Subject-Token")) == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	mux.HandleFunc("DELETE /identity/v3/auth/tokens", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		delete(c.tokens, r.Header.Get("X-Subject-Token"))
		c.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
}

func (c *Cloud) identityVersionObject() map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       c.links("identity/v3/"),
		"media-types": []any{map[string]any{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

func (c *Cloud) identityVersions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{c.identityVersionObject()}}})
}

func (c *Cloud) identityVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": c.identityVersionObject()})
}

func keystoneError(w http.ResponseWriter, status int, msg string) {
	title := map[int]string{400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}[status]
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "title": title, "message": msg}})
}

type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User struct {
					ID, Name, Password string
					Domain             *struct{ ID, Name string } `json:"domain"`
				} `json:"user"`
			} `json:"password"`
			ApplicationCredential *struct {
				ID, Name, Secret string
			} `json:"application_credential"`
			Token *struct{ ID string } `json:"token"`
		} `json:"identity"`
		Scope *struct {
			Project *struct {
				ID, Name string
				Domain   *struct{ ID, Name string } `json:"domain"`
			} `json:"project"`
		} `json:"scope"`
	} `json:"auth"`
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// issueToken is Keystone's POST /v3/auth/tokens: password (user by name in a domain, or by ID),
// application credential (by ID; by name with its user is not taken) or an existing token;
// scoped to the cloud's one project.
func (c *Cloud) issueToken(w http.ResponseWriter, r *http.Request) {
	var req authRequest
	if !decode(w, r, &req, keystoneError) {
		return
	}
	id := req.Auth.Identity
	method := ""
	switch {
	case len(id.Methods) == 1 && id.Methods[0] == "application_credential" && id.ApplicationCredential != nil:
		ac := id.ApplicationCredential
		if (ac.ID == "" || !same(ac.ID, c.cfg.ApplicationCredentialID)) || !same(ac.Secret, c.cfg.ApplicationCredentialSecret) || c.cfg.ApplicationCredentialID == "" {
			keystoneError(w, http.StatusUnauthorized, "The request you have made requires authentication.")
			return
		}
		method = "application_credential"
	case len(id.Methods) == 1 && id.Methods[0] == "password" && id.Password != nil:
		u := id.Password.User
		byName := u.Name != "" && same(u.Name, c.cfg.User) && u.Domain != nil && (u.Domain.Name == c.cfg.Domain || u.Domain.ID == c.domainID)
		if !(byName || (u.ID != "" && u.ID == c.userID)) || !same(u.Password, c.cfg.Password) || c.cfg.Password == "" {
			keystoneError(w, http.StatusUnauthorized, "The request you have made requires authentication.")
			return
		}
		if s := req.Auth.Scope; s != nil && s.Project != nil && !(s.Project.ID == c.projectID || s.Project.Name == c.cfg.Project) {
			keystoneError(w, http.StatusUnauthorized, "User "+c.userID+" has no access to project "+s.Project.ID+s.Project.Name)
			return
		}
		method = "password"
	case len(id.Methods) == 1 && id.Methods[0] == "token" && id.Token != nil:
		if c.tokenOf(id.Token.ID) == nil {
			keystoneError(w, http.StatusUnauthorized, "The request you have made requires authentication.")
			return
		}
		method = "token"
	default:
		keystoneError(w, http.StatusBadRequest, "Expecting to find identity.methods with one of password, application_credential or token.")
		return
	}
	token := "gAAAA" + newID()
	c.mu.Lock()
	c.tokens[token] = tokenInfo{expires: time.Now().Add(tokenLifetime), method: method}
	// Which credentials a client holds (a tenant's clusters may be built with others than the
	// platform's), counted among the calls.
	c.calls["token by "+method]++
	c.mu.Unlock()
	w.Header().Set("X-Subject-Token", token)
	writeJSON(w, http.StatusCreated, map[string]any{"token": c.tokenBody(token)})
}

func (c *Cloud) tokenOf(token string) map[string]any {
	c.mu.Lock()
	info, ok := c.tokens[token]
	c.mu.Unlock()
	if !ok || time.Now().After(info.expires) {
		return nil
	}
	return c.tokenBody(token)
}

func (c *Cloud) tokenBody(token string) map[string]any {
	c.mu.Lock()
	info := c.tokens[token]
	c.mu.Unlock()
	domain := map[string]any{"id": c.domainID, "name": c.cfg.Domain}
	body := map[string]any{
		"methods":    []string{info.method},
		"expires_at": info.expires.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"issued_at":  info.expires.Add(-tokenLifetime).UTC().Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": c.userID, "name": c.cfg.User, "domain": domain, "password_expires_at": nil},
		"project":    map[string]any{"id": c.projectID, "name": c.cfg.Project, "domain": domain},
		"roles":      []any{map[string]any{"id": "member", "name": "member"}, map[string]any{"id": "reader", "name": "reader"}},
		"is_domain":  false,
		"catalog":    c.catalog(),
		"audit_ids":  []string{token[len(token)-8:]},
	}
	if info.method == "application_credential" {
		body["application_credential"] = map[string]any{"id": c.cfg.ApplicationCredentialID, "name": "cluster-init", "restricted": true}
	}
	return body
}

func (c *Cloud) validateToken(w http.ResponseWriter, r *http.Request) {
	body := c.tokenOf(r.Header.Get("X-Subject-Token"))
	if body == nil {
		keystoneError(w, http.StatusNotFound, "Could not find token.")
		return
	}
	w.Header().Set("X-Subject-Token", r.Header.Get("X-Subject-Token"))
	writeJSON(w, http.StatusOK, map[string]any{"token": body})
}

// catalog lists the services clients find by type; every endpoint is public, internal and admin
// at once (a test bed has one network).
func (c *Cloud) catalog() []any {
	var out []any
	for _, s := range []struct{ typ, name, path string }{
		{"identity", "keystone", "identity/v3/"},
		{"compute", "nova", "compute/v2.1/"},
		{"network", "neutron", "network/"},
		{"image", "glance", "image/"},
		{"load-balancer", "octavia", "load-balancer/"},
	} {
		var eps []any
		for _, iface := range []string{"public", "internal", "admin"} {
			eps = append(eps, map[string]any{
				"id": s.name + "-" + iface, "interface": iface, "region": c.cfg.Region, "region_id": c.cfg.Region,
				"url": c.cfg.PublicURL + "/" + s.path,
			})
		}
		out = append(out, map[string]any{"id": s.name, "type": s.typ, "name": s.name, "endpoints": eps})
	}
	return out
}

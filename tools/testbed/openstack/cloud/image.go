package cloud

import (
	"net/http"
	"net/url"
)

func glanceError(w http.ResponseWriter, status int, msg string) {
	// Glance answers errors in plain text, as its WSGI layer does.
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(http.StatusText(status) + "\n\n" + msg + "\n\n   "))
}

func (c *Cloud) imageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /image/{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": []any{map[string]any{
			"id": "v2.16", "status": "CURRENT", "links": c.links("image/v2/")}}})
	})
	mux.HandleFunc("GET /image/v2/images", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		q := url.Values{}
		for k, v := range r.URL.Query() {
			// member_status and os_hidden shape visibility; the test bed's images are all public.
			if k != "member_status" && k != "os_hidden" {
				q[k] = v
			}
		}
		c.mu.Lock()
		out := []any{}
		for _, img := range c.images.all() {
			if matches(img, q) {
				out = append(out, glanceView(img))
			}
		}
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"images": out, "first": "/v2/images", "schema": "/v2/schemas/images"})
	}))
	mux.HandleFunc("GET /image/v2/images/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		img, ok := c.images.get(r.PathValue("id"))
		var v object
		if ok {
			v = glanceView(img)
		}
		c.mu.Unlock()
		if !ok {
			glanceError(w, http.StatusNotFound, "No image found with ID "+r.PathValue("id"))
			return
		}
		writeJSON(w, http.StatusOK, v)
	}))
}

// glanceView is an image as Glance shows it; the Docker image behind it stays the cloud's.
func glanceView(img object) object {
	v := img.clone()
	delete(v, "docker_image")
	return v
}

package values

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// The schemes a controller fetches a source with, by the source's type: Flux's GitRepository
// takes http(s) and ssh, its OCIRepository oci.
var sourceSchemes = map[string][]string{
	"git": {"https", "http", "ssh"},
	"oci": {"oci"},
}

var httpSchemes = []string{"https", "http"}

// urls parses every URL of the values as the controllers that use it will: a scheme they take, a
// host, a port in range. The schema's patterns only look at a URL's first characters, so
// "https://", "http://mirror:99999" or "https://git example/x" passed them and failed later, in
// a controller's log.
func (c *checker) urls() {
	c.source([]string{"source"})
	if repos, ok := lookup(c.merged, []string{"repositories"}); ok {
		if m, ok := repos.(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(m)) {
				c.source([]string{"repositories", name})
			}
		}
	}
	for _, key := range []string{"http_proxy", "https_proxy"} {
		if v, ok := c.str("proxies." + key); ok && v != "" {
			c.url([]string{"proxies", key}, v, httpSchemes)
		}
	}
	if hosts, ok := lookup(c.merged, []string{"registry_mirrors", "hosts_config"}); ok {
		m, _ := hosts.(map[string]any)
		for _, host := range slices.Sorted(maps.Keys(m)) {
			path := []string{"registry_mirrors", "hosts_config", host}
			if problem := hostPortProblem(host); problem != "" {
				c.addAt(path, "the registry host %s: expected host or host:port", problem)
			}
			mirrors, _ := m[host].([]any)
			for i, mirror := range mirrors {
				if v, ok := mirror.(map[string]any)["mirror_url"].(string); ok {
					c.url(append(slices.Clone(path), strconv.Itoa(i), "mirror_url"), v, httpSchemes)
				}
			}
		}
	}
	for _, key := range []string{"notifications.alerts.address", "credentials.notifications.alerts_address"} {
		if v, ok := c.str(key); ok && v != "" {
			c.url(ParseKey(key), v, httpSchemes)
		}
	}
	if tenants, ok := lookup(c.merged, []string{"workload_clusters", "tenants"}); ok {
		m, _ := tenants.(map[string]any)
		for _, ns := range slices.Sorted(maps.Keys(m)) {
			path := []string{"workload_clusters", "tenants", ns, "repository", "url"}
			if v, ok := lookup(c.merged, path); ok {
				if s, ok := v.(string); ok {
					c.url(path, s, httpSchemes)
				}
			}
		}
	}
}

// source checks a source's URL against the schemes of its type.
func (c *checker) source(path []string) {
	v, ok := lookup(c.merged, append(slices.Clone(path), "url"))
	raw, isString := v.(string)
	if !ok || !isString {
		return
	}
	kind, _ := lookup(c.merged, append(slices.Clone(path), "type"))
	schemes, known := sourceSchemes[fmt.Sprint(kind)]
	if !known {
		return // the schema names the type's problem
	}
	c.url(append(slices.Clone(path), "url"), raw, schemes)
}

func (c *checker) url(path []string, raw string, schemes []string) {
	if problem := urlProblem(raw, schemes); problem != "" {
		c.addAt(path, "%s", problem)
	}
}

func (c *checker) addAt(path []string, format string, args ...any) {
	c.problems = append(c.problems, Problem{Origin: Locate(c.layers, path, c.fallback), Key: Key(path), Message: fmt.Sprintf(format, args...)})
}

// urlProblem says what keeps raw from being a URL with one of schemes, a host and a port in
// range, or "". It quotes the scheme, host and port it found, never the whole URL: user
// information or a query may hold a token.
func urlProblem(raw string, schemes []string) string {
	expected := "expected " + strings.Join(schemes, "://, ") + "://host[:port]/path"
	if i := strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return fmt.Sprintf("a space or control character at position %d: %s", i+1, expected)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not the parser's text: it quotes the part it choked on, which may be a password
		// ("http://user:pa?ss@host" makes ":pa" a port).
		return "not a URL (a port that is not a number, a bracket or escape out of place, or a user name or password with / ? # @ not percent-encoded): " + expected
	}
	if u.User == nil && strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		// "https://user:12/3@host/x" parses as host "user:12": a password with a slash.
		return "an @ after the host (a user name or password with / ? # not percent-encoded; credentials belong in the secrets file): " + expected
	}
	if !slices.Contains(schemes, strings.ToLower(u.Scheme)) {
		if u.Scheme == "" {
			return "no scheme: " + expected
		}
		return fmt.Sprintf("scheme %q: %s", u.Scheme, expected)
	}
	if u.Opaque != "" || u.Host == "" {
		return "no host: " + expected
	}
	if problem := hostPortProblem(u.Host); problem != "" {
		return problem + ": " + expected
	}
	return ""
}

// hostPortProblem says what is wrong with host[:port] (a bracketed IPv6 address for a host), or "".
func hostPortProblem(hostPort string) string {
	host, port := hostPort, ""
	if strings.HasPrefix(hostPort, "[") {
		end := strings.Index(hostPort, "]")
		if end < 0 {
			return fmt.Sprintf("host %q: an IPv6 address without its closing ]", hostPort)
		}
		host, port = hostPort[1:end], strings.TrimPrefix(hostPort[end+1:], ":")
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Sprintf("host %q: not an IPv6 address", host)
		}
		if hostPort[end+1:] == ":" {
			return fmt.Sprintf("host %q: a colon without a port", hostPort)
		}
	} else if i := strings.LastIndex(hostPort, ":"); i >= 0 {
		host, port = hostPort[:i], hostPort[i+1:]
		if port == "" {
			return fmt.Sprintf("host %q: a colon without a port", hostPort)
		}
		if problem := hostNameProblem(host); problem != "" {
			return problem
		}
	} else if problem := hostNameProblem(host); problem != "" {
		return problem
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.HasPrefix(port, "+") {
			return fmt.Sprintf("port %q: expected a number from 1 to 65535", port)
		}
	}
	return ""
}

// hostNameProblem checks a host name as a resolver takes it (RFC 1123 labels; an underscore is
// let through, as some internal names have one), or an IPv4 address.
func hostNameProblem(host string) string {
	if host == "" {
		return "an empty host"
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if len(host) > 253 {
		return fmt.Sprintf("host of %d characters: expected at most 253", len(host))
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if !slices.ContainsFunc(labels, func(l string) bool { _, err := strconv.Atoi(l); return err != nil }) {
		return fmt.Sprintf("host %q: not an IP address", host)
	}
	for _, label := range labels {
		ok := label != "" && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-'
		for _, r := range label {
			ok = ok && (r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_'))
		}
		if !ok {
			return fmt.Sprintf("host %q: expected a DNS name or an IP address", host)
		}
	}
	return ""
}

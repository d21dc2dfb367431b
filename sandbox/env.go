package sandbox

import (
	"path/filepath"
	"strings"
)

// dropped are never passed to a confined process: the agents' sockets
// (Landlock up to ABI 8 does not govern connecting to a pathname socket,
// so the address itself goes), and what the sandbox sets itself.
var dropped = []string{
	"SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "GPG_AGENT_INFO",
	"TMPDIR", "TMP", "TEMP", "IS_SANDBOX",
}

// cacheVars are the toolchains' caches: each is the run's own, per
// project (a cache shared between projects is one an agent could poison
// for the others), unless the user set it to a path inside one of
// [sandbox] write, which says the agent may write there.
var cacheVars = []string{"GOCACHE", "GOMODCACHE", "npm_config_cache", "NPM_CONFIG_CACHE"}

// proxyVars point a process at the run's proxy; the NO_PROXY pair is
// emptied, so that no host bypasses it (a bypass fails on Landlock's TCP
// rule instead of reaching the host).
var proxyVars = []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"}
var noProxyVars = []string{"NO_PROXY", "no_proxy"}

// environ is env as a confined process gets it: the agents' sockets
// gone, TMPDIR the call's own, IS_SANDBOX=1 (Claude Code refuses to skip
// its permissions as root without it), the caches the run's (cacheVars),
// and the
// proxy variables the run's proxy (with network = "none" none at all;
// with "all" the user's own).
func (s *Sandbox) environ(env []string, tmp string) []string {
	drop := append([]string(nil), dropped...)
	if s.spec.Network != NetAll {
		drop = append(append(drop, proxyVars...), noProxyVars...)
	}
	out := make([]string, 0, len(env)+16)
	kept := map[string]bool{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case contains(cacheVars, name):
			if s.writable(value) {
				out = append(out, kv)
				kept[strings.ToLower(name)] = true
			}
		case !contains(drop, name):
			out = append(out, kv)
		}
	}
	out = append(out, "TMPDIR="+tmp, "IS_SANDBOX=1")
	for _, c := range []struct{ name, dir string }{
		{"GOCACHE", s.caches.goBuild}, {"GOMODCACHE", s.caches.goMod}, {"npm_config_cache", s.caches.npm},
	} {
		if !kept[strings.ToLower(c.name)] {
			out = append(out, c.name+"="+c.dir)
		}
	}
	if s.proxy != nil {
		url := "http://" + s.proxy.Addr()
		for _, v := range proxyVars {
			out = append(out, v+"="+url)
		}
		for _, v := range noProxyVars {
			out = append(out, v+"=")
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writable reports whether path lies inside one of [sandbox] write.
func (s *Sandbox) writable(path string) bool {
	if path == "" || !filepath.IsAbs(path) {
		return false
	}
	p := resolve(path)
	for _, w := range s.spec.Write {
		if within(p, resolve(w)) {
			return true
		}
	}
	return false
}

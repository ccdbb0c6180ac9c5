package hooks

import (
	"net/url"
	"path/filepath"
	"sort"
	"strings"
)

// envAllowed is the allow-list of docs/architecture.md: the only variables of
// the operator's environment a hook ever sees, and only when they are set.
// Everything else (tokens, SSH agent sockets, cloud credentials...) stays
// behind.
var envAllowed = map[string]bool{
	"PATH": true, "HOME": true, "LANG": true, "LC_ALL": true, "TZ": true, "TERM": true,
	"http_proxy": true, "https_proxy": true, "no_proxy": true,
}

// defaultPath is used when the parent has no PATH at all, so that a hook's
// "#!/bin/sh" script can still find the usual tools.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// wardenPrefix marks the variables the engine itself hands to a hook.
const wardenPrefix = "WARDEN_"

// BuildEnv returns the environment of a hook process, sorted so that it is
// stable (tests, receipts):
//
//   - from parent, only the allow-listed names, and only when present
//     (an operator's WARDEN_* variables do not pass either: those are the
//     engine's to set, through extra);
//   - every key of extra that starts with WARDEN_; any other key is dropped
//     silently, so a caller cannot widen the allow-list by mistake. Keys or
//     values that cannot be in an environment (a '=' in the key, a NUL
//     anywhere) are dropped too, rather than failing the spawn later;
//   - http_proxy and https_proxy lose any user:password in them (a
//     value that does not parse as a URL is dropped whole): the
//     operator's proxy credentials are theirs, and a hook's way out is
//     the egress proxy;
//   - PATH = pathFirst, then the parent's PATH (or defaultPath when the
//     parent has none), without repeating pathFirst and without empty
//     entries (an empty entry means "the current directory", which would let
//     a file in the hook's working directory shadow a system tool).
func BuildEnv(parent []string, extra map[string]string, pathFirst string) []string {
	vals := make(map[string]string, len(envAllowed)+len(extra))
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envAllowed[k] {
			continue
		}
		if proxyVar[k] {
			var ok bool
			if v, ok = withoutCredentials(v); !ok {
				delete(vals, k)
				continue
			}
		}
		// The last occurrence wins, as it does for os/exec and getenv.
		vals[k] = v
	}
	for k, v := range extra {
		if len(k) <= len(wardenPrefix) || !strings.HasPrefix(k, wardenPrefix) ||
			strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			continue
		}
		vals[k] = v
	}

	parentPath, ok := vals["PATH"]
	if !ok || parentPath == "" {
		parentPath = defaultPath
	}
	var parts []string
	first := ""
	if pathFirst != "" {
		first = filepath.Clean(pathFirst)
		parts = append(parts, pathFirst)
	}
	seen := map[string]bool{}
	for _, dir := range strings.Split(parentPath, ":") {
		if dir == "" {
			continue
		}
		c := filepath.Clean(dir)
		if c == first || seen[c] {
			continue
		}
		seen[c] = true
		parts = append(parts, dir)
	}
	vals["PATH"] = strings.Join(parts, ":")

	env := make([]string, 0, len(vals))
	for k, v := range vals {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// proxyVar names the allow-listed variables that may carry credentials.
var proxyVar = map[string]bool{"http_proxy": true, "https_proxy": true}

// withoutCredentials is the proxy URL v without its userinfo, and false
// when v is not a URL warden can vouch for (then it is dropped rather than
// passed on with a secret in it). "host:3128", which curl and pip accept,
// is read as http://host:3128.
func withoutCredentials(v string) (string, bool) {
	if v == "" {
		return v, true
	}
	raw := v
	if !strings.Contains(v, "://") {
		raw = "http://" + v
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	if u.User == nil {
		return v, true
	}
	u.User = nil
	return u.String(), true
}

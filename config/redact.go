package config

import (
	"net/url"
	"strings"
)

// Redacted replaces a secret in a URL.
const Redacted = "REDACTED"

// RedactURL hides the credentials a URL carries: its user information and
// the values of secret-looking query keys (api-key, token, key, secret,
// password, sig, …). Anything that does not parse as a URL is returned as
// it is.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	changed := false
	if u.User != nil {
		u.User = url.User(Redacted)
		changed = true
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, _, hasValue := strings.Cut(p, "=")
			if key, err := url.QueryUnescape(name); err == nil && hasValue && IsSecretQueryKey(key) {
				parts[i] = name + "=" + Redacted
				changed = true
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if !changed {
		return s
	}
	return u.String()
}

// URLSecrets lists the secrets a URL carries (the password of its user
// information, the values of secret-looking query keys), to be redacted
// wherever text is recorded, logged or printed.
func URLSecrets(s string) []string {
	u, err := url.Parse(s)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p, url.QueryEscape(p))
		}
	}
	for key, values := range u.Query() {
		if IsSecretQueryKey(key) {
			for _, v := range values {
				if v != "" {
					out = append(out, v, url.QueryEscape(v))
				}
			}
		}
	}
	return out
}

// secretQueryWords are the names, or the ends of names (after - or _),
// of query keys whose values are credentials.
var secretQueryWords = []string{"key", "apikey", "token", "secret", "password", "passwd", "pwd", "sig", "signature",
	"auth", "authorization", "credential", "credentials", "code"}

// IsSecretQueryKey reports whether a URL query key names a credential:
// api-key, api_key, apiKey, access_token, token, key, secret, client_secret,
// password, sig, X-Amz-Signature, …
func IsSecretQueryKey(key string) bool {
	k := strings.ToLower(key)
	for _, w := range secretQueryWords {
		if k == w || strings.HasSuffix(k, "-"+w) || strings.HasSuffix(k, "_"+w) || strings.HasSuffix(k, "."+w) {
			return true
		}
	}
	// camelCase: apiKey, accessToken
	return strings.HasSuffix(k, "key") || strings.HasSuffix(k, "token") || strings.HasSuffix(k, "secret")
}

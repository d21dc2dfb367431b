package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// urlInText finds URL-like words in a string value: a scheme, ://, and
// what follows up to a space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// credentialIn finds the first string in a config's text that carries
// a credential in a URL: a password (or, for http and https, any user
// name) in its userinfo, or a query key that names a secret. It returns
// the key path that holds it (e.g. "model.base_url", "stop.tests.cmd")
// and the URL with the credential masked; ok is false when there is none.
// A job is published to every worker of the fleet, so a config carrying
// one is refused rather than sent.
func credentialIn(text string) (key, masked string, ok bool) {
	var doc map[string]any
	if _, err := toml.Decode(text, &doc); err != nil {
		return "", "", false // config.Load has already said what is wrong with it
	}
	var walk func(path string, v any) bool
	walk = func(path string, v any) bool {
		switch v := v.(type) {
		case string:
			for _, w := range urlInText.FindAllString(v, -1) {
				if m, bad := credentialURL(w); bad {
					key, masked = path, m
					return true
				}
			}
		case map[string]any:
			names := make([]string, 0, len(v))
			for k := range v {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				if walk(joinKey(path, k), v[k]) {
					return true
				}
			}
		case []map[string]any:
			for i, e := range v {
				if walk(joinKey(path, strconv.Itoa(i)), e) {
					return true
				}
			}
		case []any:
			for i, e := range v {
				if walk(joinKey(path, strconv.Itoa(i)), e) {
					return true
				}
			}
		}
		return false
	}
	if walk("", doc) {
		return key, masked, true
	}
	return "", "", false
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// credentialURL reports whether raw carries a credential, and raw with it
// masked.
func credentialURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	bad := false
	if u.User != nil {
		_, hasPassword := u.User.Password()
		if hasPassword || (u.Scheme == "http" || u.Scheme == "https") && u.User.Username() != "" {
			bad = true
			u.User = url.User("xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		if IsSecretQueryKey(k) && strings.Join(q[k], "") != "" {
			bad = true
			q.Set(k, "xxxxx")
		}
	}
	if !bad {
		return "", false
	}
	u.RawQuery = q.Encode()
	return u.String(), true
}

// RefuseCredential is the one-sentence refusal of a config submitted to a
// fleet (text, the file c was loaded from) that carries a credential, at
// its key's line; nil when it carries none.
func (c *Config) RefuseCredential(text string) error {
	key, masked, ok := credentialIn(text)
	if !ok {
		return nil
	}
	// [[stop]] entries are found by the array's name: the nearest line.
	lineKey := key
	if i := strings.IndexFunc(lineKey, func(r rune) bool { return r >= '0' && r <= '9' }); i > 0 && lineKey[i-1] == '.' {
		lineKey = strings.TrimSuffix(lineKey[:i], ".")
	}
	return c.ErrorAt(lineKey, fmt.Sprintf("%s carries a credential in %s, and a submitted job is sent to every worker of the fleet; remove it and give the workers the secret in their own environment (e.g. [model].api_key_env)", key, masked))
}

package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxRefLen bounds the readable part of a RefName; a longer id is cut
// there (and so gets the hash that keeps it apart from others).
const maxRefLen = 64

// RefName is a task's id made safe as one component of a git ref name,
// as in ralph/<batch>/task/<RefName(id)>: an id that already is one (ASCII
// letters, digits, '-', '_' and '.', within git check-ref-format's rules
// and not over 64 bytes) is itself; any other is changed (each byte
// outside that set becomes '-', a leading '.' or '-' and a trailing '.'
// become '_', ".." and ".lock" are broken up, the empty id is "task") and
// followed by '-' and eight hex digits of the id's SHA-256, so two ids
// that change to the same text still get different names.
func RefName(id string) string {
	b := make([]byte, 0, min(len(id), maxRefLen))
	for i := 0; i < len(id) && len(b) < maxRefLen; i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if len(b) > 0 && b[len(b)-1] == '.' {
				c = '_'
			}
		default:
			c = '-'
		}
		b = append(b, c)
	}
	if len(b) == 0 {
		b = append(b, "task"...)
	}
	if b[0] == '.' || b[0] == '-' {
		b[0] = '_'
	}
	if b[len(b)-1] == '.' {
		b[len(b)-1] = '_'
	}
	s := string(b)
	if strings.HasSuffix(s, ".lock") {
		s = s[:len(s)-len(".lock")] + "_lock"
	}
	if s == id {
		return s
	}
	sum := sha256.Sum256([]byte(id))
	return s + "-" + hex.EncodeToString(sum[:4])
}

// checkBranch says why name cannot be a git branch name (the rules of git
// check-ref-format --branch), or "".
func checkBranch(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case name == "@" || name == "HEAD":
		return "git reserves " + name
	case strings.HasPrefix(name, "-"):
		return "it starts with '-'"
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "it has an empty part between slashes"
	case strings.HasSuffix(name, "."):
		return "it ends with '.'"
	case strings.Contains(name, ".."):
		return "it has \"..\""
	case strings.Contains(name, "@{"):
		return "it has \"@{\""
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return "it has the character " + quoteByte(c)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") {
			return "a part of it starts with '.'"
		}
		if strings.HasSuffix(part, ".lock") {
			return "a part of it ends with \".lock\""
		}
	}
	return ""
}

func quoteByte(c byte) string {
	if c < 0x20 || c == 0x7f {
		return "0x" + hex.EncodeToString([]byte{c})
	}
	return "'" + string(c) + "'"
}

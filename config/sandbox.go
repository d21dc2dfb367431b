package config

import "path/filepath"

// Sandbox is the [sandbox] section (DESIGN §22), decoded with its
// positions and nothing more: what its values mean, and whether they are
// right, is the sandbox package's (checked by assemble.Check).
type Sandbox struct {
	Mode    string   `toml:"mode"`    // auto | landlock | bwrap | off (sandbox.ParseMode)
	Network string   `toml:"network"` // model | none | all (sandbox.ParseNetwork); "" is model
	Read    []string `toml:"read"`    // more read-only paths
	Write   []string `toml:"write"`   // more read-write paths
	Hide    []string `toml:"hide"`    // more paths never visible
	Hosts   []string `toml:"hosts"`   // more hosts the proxy allows
}

// SandboxMode is the run's [sandbox] mode as written ("" without a
// [sandbox] section or a mode in it: not sandboxed).
func (c *Config) SandboxMode() string {
	if c.Sandbox == nil {
		return ""
	}
	return c.Sandbox.Mode
}

// SetSandboxMode sets [sandbox] mode, as --sandbox does, adding the
// section when the config has none.
func (c *Config) SetSandboxMode(mode string) {
	if c.Sandbox == nil {
		c.Sandbox = &Sandbox{}
	}
	c.Sandbox.Mode = mode
}

// resolveSandboxPaths makes [sandbox] read, write and hide absolute,
// relative to the config file's directory as every path of the config is.
func (s *Sandbox) resolvePaths(dir string) {
	if s == nil {
		return
	}
	for _, l := range [][]string{s.Read, s.Write, s.Hide} {
		for i, p := range l {
			if p != "" && !filepath.IsAbs(p) {
				l[i] = filepath.Join(dir, p)
			}
		}
	}
}

// Pos is where key's value is written: its line and the column its value
// starts at (0 when unknown). A key not written gives its table's line.
func (c *Config) Pos(key string) (line, col int) {
	if c.lines == nil {
		return 0, 0
	}
	line = c.lines.findPath(key)
	if l, ok := c.lines.keys[key]; ok && l == line {
		col = c.lines.cols[key]
	}
	return line, col
}

// ErrorAtValue is an error about key's value, naming the config's file,
// the line and the column of the value (file:line:col).
func (c *Config) ErrorAtValue(key, msg string) error {
	line, col := c.Pos(key)
	return &Error{File: c.displayName(), Line: line, Col: col, Msg: msg}
}

// Package builtin provides ralph's built-in capabilities: ccos.echo,
// ccos.math.*, shell.exec, fs.read/write/list and kv.get/put.
//
// Invariants:
//   - shell.exec runs argv directly (no shell), only commands on the
//     allowlist, inside the workdir, in its own process group that a
//     timeout kills whole; each output stream is capped at 1 MiB.
//   - fs.* resolve every path through an os.Root at the workdir, so "..",
//     absolute paths outside it and escaping symlinks are refused.
package builtin

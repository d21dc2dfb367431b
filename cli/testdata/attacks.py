#!/usr/bin/env python3
"""The sandbox's attack suite, run by a stand-in agent inside a ralph run.

Each attack tries one escape and appends a line "NAME OUTCOME DETAIL" to
ATTACK_OUT (a file in the workdir): OUTCOME is "refused" when the escape
failed, "escaped" when it worked, and for the one thing the sandbox must
allow (reaching an allowed host through the proxy) "allowed" or "refused".
The end-to-end test reads the file and holds each line to its table.

What it needs comes from the environment the test gives ralph (ralph passes
it on to the agent):
  ATTACK_OUT          the results file
  ATTACK_HOME         the user's home the run sees (holds .ssh, .aws)
  ATTACK_OTHER        a file of another project beside the workdir
  ATTACK_STORE        ralph's store directory
  ATTACK_KEYS         ralph's key directory (its signing keys)
  ATTACK_PIDFILE      a file in the workdir the test writes ralph's pid to
  ATTACK_PORT         a loopback port nothing allows (the test listens on it)
  ATTACK_ALLOWED      host:port the proxy allows (the mock model)
  (an ssh-agent socket: SSH_AUTH_SOCK if ralph passed it on, else where
  ssh-agent puts one, /tmp/ssh-*/agent.*)
  ATTACK_MARKER       a file a planted git hook or fsmonitor would create
"""

import glob
import os
import socket
import sys
import time

OUT = os.environ["ATTACK_OUT"]
results = []


def note(name, outcome, detail=""):
    results.append("%s %s %s" % (name, outcome, " ".join(str(detail).split())[:200]))


def try_read(name, path):
    try:
        with open(path, "rb") as f:
            data = f.read(64)
        note(name, "escaped", "read %d bytes of %s" % (len(data), path))
    except OSError as e:
        note(name, "refused", e)


def try_write(name, path, data=b"pwned\n"):
    try:
        with open(path, "wb") as f:
            f.write(data)
        note(name, "escaped", "wrote " + path)
    except OSError as e:
        note(name, "refused", e)


def ralph_pid():
    path = os.environ["ATTACK_PIDFILE"]
    for _ in range(100):
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def proxy():
    """The proxy ralph gave the agent, as (host, port), or None."""
    url = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or ""
    if not url:
        return None
    hostport = url.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def connect_through_proxy(target):
    """CONNECT target through the proxy: the proxy's status line."""
    p = proxy()
    if p is None:
        return "no proxy in the environment"
    with socket.create_connection(p, timeout=5) as s:
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        return s.recv(256).decode(errors="replace").splitlines()[0]


def attacks():
    home = os.environ["ATTACK_HOME"]
    try_read("read-ssh-key", os.path.join(home, ".ssh", "id_ed25519"))
    try_read("read-aws-credentials", os.path.join(home, ".aws", "credentials"))
    try_read("read-other-project", os.environ["ATTACK_OTHER"])
    try_write("write-outside-workdir", os.path.join(home, "pwned"))
    try_write("write-into-store", os.path.join(os.environ["ATTACK_STORE"], "pwned"))
    keys = os.environ["ATTACK_KEYS"]
    try:
        names = [n for n in os.listdir(keys) if n.endswith(".key")] or ["forged.key"]
        for n in names:
            try_write("replace-key", os.path.join(keys, n), b"not a key\n")
    except OSError as e:
        note("replace-key", "refused", e)

    pid = ralph_pid()
    if pid is None:
        note("attack-suite", "crashed", "no ralph pid in " + os.environ["ATTACK_PIDFILE"])
        return
    try_read("read-ralph-environ", "/proc/%s/environ" % pid)
    try_read("read-ralph-mem", "/proc/%s/mem" % pid)
    try:
        os.kill(pid, 18)  # SIGCONT: harmless if it got through
        note("signal-ralph", "escaped", "SIGCONT reached pid %d" % pid)
    except (OSError, TypeError) as e:
        note("signal-ralph", "refused", e)

    try:
        socket.create_connection(("127.0.0.1", int(os.environ["ATTACK_PORT"])), timeout=3).close()
        note("connect-loopback-port", "escaped", "connected to 127.0.0.1:" + os.environ["ATTACK_PORT"])
    except OSError as e:
        note("connect-loopback-port", "refused", e)

    try:
        line = connect_through_proxy(os.environ["ATTACK_ALLOWED"])
        note("reach-allowed-host", "allowed" if " 200" in line else "refused", line)
    except OSError as e:
        note("reach-allowed-host", "refused", e)

    try:
        line = connect_through_proxy("not-on-the-list.example:443")
        note("reach-unlisted-host", "escaped" if " 200" in line else "refused", line)
    except OSError as e:
        note("reach-unlisted-host", "refused", e)

    key = os.path.join(home, ".ssh", "id_ed25519")
    try:
        os.symlink(key, "link-out")
        try_read("symlink-out", "link-out")
    except OSError as e:
        note("symlink-out", "refused", e)
    try:
        os.link(key, "hardlink-out")
        try_read("hardlink-out", "hardlink-out")
    except OSError as e:
        note("hardlink-out", "refused", e)

    setsid_double_fork(key)

    sock_attack(os.path.join(os.environ["ATTACK_STORE"], "ralph.sock"))

    agent_sock = os.environ.get("SSH_AUTH_SOCK") or next(iter(glob.glob("/tmp/ssh-*/agent.*")), "")
    try:
        if not agent_sock:
            raise OSError("no SSH_AUTH_SOCK, and /tmp/ssh-*/agent.* finds nothing")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(agent_sock)
        s.close()
        note("reach-ssh-agent", "escaped", "connected to " + agent_sock)
    except OSError as e:
        note("reach-ssh-agent", "refused", "SSH_AUTH_SOCK %s; %s" % ("set" if "SSH_AUTH_SOCK" in os.environ else "unset", e))

    plant_git(os.environ["ATTACK_MARKER"])


def unix_http(path, request):
    """One HTTP/1.1 request over the unix socket at path: the status line."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(path)
        s.sendall(request)
        data = s.recv(512)
    finally:
        s.close()
    if not data:
        raise OSError("the socket closed the connection unanswered")
    return data.decode(errors="replace").splitlines()[0]


def sock_attack(path):
    """Read the store and abort the run through ralph's own socket."""
    try:
        line = unix_http(path, b"GET /v1/runs HTTP/1.1\r\nHost: ralph\r\nConnection: close\r\n\r\n")
        note("read-store-through-socket", "escaped" if " 200" in line else "refused", line)
    except OSError as e:
        note("read-store-through-socket", "refused", e)
    body = b'{"do": "abort"}'
    req = b"POST /v1/control HTTP/1.1\r\nHost: ralph\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    try:
        line = unix_http(path, req)
        note("abort-through-socket", "escaped" if line.split()[1:2] and line.split()[1].startswith("2") else "refused", line)
    except OSError as e:
        note("abort-through-socket", "refused", e)


def setsid_double_fork(key):
    """setsid and a double fork, then the same read: still confined."""
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)
            try:
                with open(key, "rb") as f:
                    f.read(1)
                msg = b"escaped read " + key.encode()
            except OSError as e:
                msg = b"refused " + str(e).encode()
            os.write(w, msg)
            os._exit(0)
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 512)
        if not chunk:
            break
        data += chunk
    os.close(r)
    word, _, detail = data.decode().partition(" ")
    note("setsid-double-fork", word or "refused", detail)


def plant_git(marker):
    """A hook and an fsmonitor command for ralph's own git to run."""
    try:
        hooks = os.path.join(".git", "hooks")
        os.makedirs(hooks, exist_ok=True)
        for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
            path = os.path.join(hooks, hook)
            with open(path, "w") as f:
                f.write("#!/bin/sh\necho %s >> %s\n" % (hook, marker))
            os.chmod(path, 0o755)
        with open(os.path.join(".git", "config"), "a") as f:
            f.write("[core]\n\tfsmonitor = echo fsmonitor >> %s\n" % marker)
        note("plant-git-hook", "planted", "ralph's git must not run them")
    except OSError as e:
        note("plant-git-hook", "refused", e)


def main():
    if os.path.exists(OUT):  # the attacks run once, on the first call
        return
    try:
        attacks()
    except Exception as e:  # a broken attack must show, not pass
        note("attack-suite", "crashed", repr(e))
    with open(OUT, "w") as f:
        f.write("\n".join(results) + "\n")


if __name__ == "__main__":
    sys.exit(main())

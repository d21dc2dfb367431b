#!/usr/bin/env python3
"""Check a ralph bundle with no ralph code: python3 check_bundle.py FILE [VKEY...]

Recomputes every action hash (SHA-256 of the canonical encoding), the hash
chain and the RFC 6962 Merkle root, and checks every tree checkpoint: its
signed-note Ed25519 signature (RFC 8032, written out below from the RFC's
reference code) with the key in force (the last key line before it), its
key hash, and that the tree size, root and chain hash it signs are those of
the actions before it. Given VKEYs, every key line must be one of them.
Standard library only.
Exit status 0 and "ok ..." when the bundle holds, 1 and the reason when not.
"""
import base64
import hashlib
import struct
import sys

# --- Ed25519 verification (RFC 8032 §5.1.7, reference code of §6) ---
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _add(a, b):
    A = (a[1] - a[0]) * (b[1] - b[0]) % P
    B = (a[1] + a[0]) * (b[1] + b[0]) % P
    C = 2 * a[3] * b[3] * D % P
    Dd = 2 * a[2] * b[2] % P
    E, F, G, H = B - A, Dd - C, Dd + C, B + A
    return (E * F % P, G * H % P, F * G % P, E * H % P)


def _mul(s, pt):
    q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, pt)
        pt = _add(pt, pt)
        s >>= 1
    return q


def _equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0


def _recover_x(y, sign):
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P)
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if (x & 1) != sign:
        x = P - x
    return x


def _decompress(s):
    if len(s) != 32:
        return None
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


_GY = 4 * pow(5, P - 2, P) % P
_G = (_recover_x(_GY, 0), _GY, 1, _recover_x(_GY, 0) * _GY % P)


def ed25519_verify(public, msg, sig):
    if len(public) != 32 or len(sig) != 64:
        return False
    A = _decompress(public)
    R = _decompress(sig[:32])
    if A is None or R is None:
        return False
    s = int.from_bytes(sig[32:], "little")
    if s >= L:
        return False
    h = int.from_bytes(hashlib.sha512(sig[:32] + public + msg).digest(), "little") % L
    return _equal(_mul(s, _G), _add(R, _mul(h, A)))


# --- RFC 6962 Merkle tree ---
def leaf_hash(action_hash):
    return hashlib.sha256(b"\x00" + action_hash).digest()


def mth(leaves):
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def fail(msg):
    print("bundle does not verify: " + msg)
    sys.exit(1)


def use_key(vkey, pinned):
    """Parses a key line's verifier key: name+hash+base64(0x01 || key)."""
    if pinned and vkey not in pinned:
        fail("signed by key %s, not by a pinned key (%s)" % (vkey, ", ".join(pinned)))
    name, key_hash_hex, key_b64 = vkey.split("+", 2)
    key = base64.b64decode(key_b64)
    if key[0] != 1 or len(key) != 33:
        fail("the verifier key is not Ed25519")
    if hashlib.sha256(name.encode() + b"\n" + key).digest()[:4] != bytes.fromhex(key_hash_hex):
        fail("the verifier key's hash does not match")
    return vkey, name, key_hash_hex, key[1:]


def main():
    path = sys.argv[1]
    lines = open(path, "rb").read().decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    if lines[0] != "ralph-bundle 1":
        fail("not a ralph bundle")
    if not lines[1].startswith("key "):
        fail("no key line")
    pinned = sys.argv[2:]
    vkey, name, key_hash_hex, public = use_key(lines[1][4:], pinned)

    leaves, chain, checked = [], bytes(32), 0
    for line in lines[2:]:
        kind, _, body = line.partition(" ")
        if kind == "key":
            vkey, name, key_hash_hex, public = use_key(body, pinned)
        elif kind == "a":
            enc = base64.b64decode(body)
            seq = struct.unpack(">Q", enc[1:9])[0]
            if enc[0] != 1 or seq != len(leaves) + 1:
                fail("action %d is out of place" % (len(leaves) + 1))
            ah = hashlib.sha256(enc).digest()
            chain = hashlib.sha256(chain + ah + struct.pack(">Q", seq)).digest()
            leaves.append(leaf_hash(ah))
        elif kind == "c":
            note = base64.b64decode(body).decode("utf-8")
            text, _, sigs = note.rpartition("\n\n")
            text += "\n"
            origin, size, root_b64, chain_line, time_line = text.split("\n")[:5]
            sig_name, sig_b64 = sigs.strip().split("\n")[0][len("\u2014 "):].split(" ")
            raw = base64.b64decode(sig_b64)
            if sig_name != name or origin != name or raw[:4] != bytes.fromhex(key_hash_hex):
                fail("checkpoint %s is not signed by %s" % (size, vkey))
            if not ed25519_verify(public, text.encode("utf-8"), raw[4:]):
                fail("checkpoint %s: the Ed25519 signature does not verify" % size)
            if int(size) != len(leaves):
                fail("checkpoint %s follows action %d" % (size, len(leaves)))
            if base64.b64decode(root_b64) != mth(leaves):
                fail("checkpoint %s signs another Merkle root than the actions make" % size)
            if chain_line != "chain " + chain.hex():
                fail("checkpoint %s signs another chain hash" % size)
            checked += 1
        elif kind == "c1":
            pass  # a first-format checkpoint; the tree checkpoints after it cover its actions
        elif kind == "end":
            n, chain_hex, root_hex = body.split(" ")
            if int(n) != len(leaves) or chain_hex != chain.hex():
                fail("the end line does not match the actions")
            if leaves and root_hex != mth(leaves).hex():
                fail("the end line's root does not match the actions")
            print("ok %d actions, %d checkpoints verified, root %s" % (len(leaves), checked, mth(leaves).hex()))
            return
        else:
            fail("unknown line kind %r" % kind)
    fail("the bundle ends without its end line")


if __name__ == "__main__":
    main()

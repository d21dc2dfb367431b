package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"hash"

	"filippo.io/edwards25519"
)

// maxSigBatch bounds how many checkpoint signatures one batch equation
// checks. Larger batches make the multi-scalar multiplication cheaper per
// signature (about 5 µs at a thousand, 7 µs at a hundred), but a batch that
// fails is checked again one signature at a time.
const maxSigBatch = 2048

// sigChecker checks Ed25519 signatures by one public key with the group
// equation of RFC 8032 §5.1.7, [8][S]B = [8]R + [8][k]A, where
// k = SHA-512(R ‖ A ‖ M) mod ℓ, S must be below ℓ and R must be a canonical
// point encoding. It checks one signature at a time or many at once.
//
// A signature made the standard way (R = [r]B) satisfies this equation
// exactly when it satisfies the cofactorless one, [S]B = R + [k]A, that Go's
// crypto/ed25519 checks. They differ only for a signature whose R carries a
// small-order component, which only the private key's holder can make and
// ralph's signer never does; the cofactored equation is the one that
// batches soundly, so ralph uses it alone and the answer does not depend on
// which batch a checkpoint falls in.
type sigChecker struct {
	pub  ed25519.PublicKey
	negA *edwards25519.Point // −A; nil if pub is not a canonical point
	h    hash.Hash           // SHA-512, reused
	msg  [checkpointMessageLen]byte
	kbuf [sha512.Size]byte
}

func newSigChecker(pub ed25519.PublicKey) *sigChecker {
	c := &sigChecker{pub: pub, h: sha512.New()}
	if len(pub) == ed25519.PublicKeySize && canonicalPoint(pub) {
		if A, err := new(edwards25519.Point).SetBytes(pub); err == nil {
			c.negA = new(edwards25519.Point).Negate(A)
		}
	}
	return c
}

// canonicalPoint reports whether b is the canonical encoding of a point if
// it encodes one: y below p = 2²⁵⁵−19, and no sign bit on x = 0 (y = ±1).
// edwards25519's SetBytes accepts both non-canonical forms; RFC 8032 and
// crypto/ed25519 (which compares R's bytes) do not.
func canonicalPoint(b []byte) bool {
	const top = 0x7f
	if b[31]&top == top && b[0] >= 0xed && allFF(b[1:31]) {
		return false // y ≥ p
	}
	sign := b[31] >> 7
	if sign == 1 && b[31]&top == 0 && b[0] == 1 && allZero(b[1:31]) {
		return false // y = 1, x = 0 with the sign bit set
	}
	if sign == 1 && b[31]&top == top && b[0] == 0xec && allFF(b[1:31]) {
		return false // y = p − 1, x = 0 with the sign bit set
	}
	return true
}

func allFF(b []byte) bool {
	for _, x := range b {
		if x != 0xff {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// parse decodes R and S from cp's signature and computes k; ok is false if
// the signature is malformed (and so does not verify).
func (c *sigChecker) parse(cp *Checkpoint, R *edwards25519.Point, S, k *edwards25519.Scalar) bool {
	sig := cp.Signature
	if c.negA == nil || len(sig) != ed25519.SignatureSize || !canonicalPoint(sig[:32]) {
		return false
	}
	if _, err := R.SetBytes(sig[:32]); err != nil {
		return false
	}
	if _, err := S.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	c.h.Reset()
	c.h.Write(sig[:32])
	c.h.Write(c.pub)
	c.h.Write(cp.message(c.msg[:0]))
	// SetUniformBytes fails only for input that is not 64 bytes long.
	_, err := k.SetUniformBytes(c.h.Sum(c.kbuf[:0]))
	return err == nil
}

// verify checks one signature: [8]([S]B − [k]A − R) is the identity.
func (c *sigChecker) verify(cp *Checkpoint) bool {
	var R edwards25519.Point
	var S, k edwards25519.Scalar
	if !c.parse(cp, &R, &S, &k) {
		return false
	}
	P := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(&k, c.negA, &S)
	P.Subtract(P, &R)
	P.MultByCofactor(P)
	return P.Equal(edwards25519.NewIdentityPoint()) == 1
}

// verifyBatch reports whether every decoded checkpoint in cps is validly
// signed. It checks one random linear combination of their equations,
//
//	[8]( Σ zᵢRᵢ + (Σ zᵢkᵢ)A − (Σ zᵢSᵢ)B ) = identity,
//
// with fresh 128-bit random zᵢ: if any signature is bad, the sum is the
// identity with probability about 2⁻¹²⁸. All the checkpoints share A, so
// its term, like B's, is one scalar multiplication for the whole batch.
// A false answer says only that some signature is bad; verify names it.
func (c *sigChecker) verifyBatch(cps []cpEntry) bool {
	if c.negA == nil {
		return false
	}
	zs := make([]byte, 16*len(cps))
	// crypto/rand.Read never returns an error: it crashes the program
	// rather than hand back fewer random bytes.
	_, _ = rand.Read(zs)
	points := make([]edwards25519.Point, 0, len(cps))
	var sumK, sumS, S, k, z edwards25519.Scalar
	var zb [32]byte
	n := 0
	for i := range cps {
		if !cps[i].ok {
			continue // not decoded: reported already, no signature to check
		}
		points = points[:n+1]
		if !c.parse(&cps[i].cp, &points[n], &S, &k) {
			return false
		}
		copy(zb[:16], zs[16*n:])
		if _, err := z.SetCanonicalBytes(zb[:]); err != nil {
			return false // cannot happen: z < 2¹²⁸ < ℓ
		}
		sumK.MultiplyAdd(&z, &k, &sumK)
		sumS.MultiplyAdd(&z, &S, &sumS)
		n++
	}
	if n == 0 {
		return true
	}
	P := msm128(zs[:16*n], points)
	// (Σ zᵢkᵢ)A − (Σ zᵢSᵢ)B = −((Σ zᵢkᵢ)(−A) + (Σ zᵢSᵢ)B)
	Q := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(&sumK, c.negA, &sumS)
	P.Subtract(P, Q)
	P.MultByCofactor(P)
	return P.Equal(edwards25519.NewIdentityPoint()) == 1
}

// msm128 returns Σ zᵢPᵢ, where zᵢ is the 128-bit little-endian number in
// zs[16i:16i+16], by Pippenger's bucket method: signed digits of c bits
// (c chosen for the batch size), one bucket per digit magnitude, so each
// point costs about 128/c additions and each window 2^c more. For the
// hundreds of signatures in a batch this is about a third cheaper than
// the windowed-NAF method edwards25519 offers.
func msm128(zs []byte, ps []edwards25519.Point) *edwards25519.Point {
	c := 8
	switch {
	case len(ps) < 32:
		c = 4
	case len(ps) < 256:
		c = 6
	}
	windows := (128+c-1)/c + 1 // one more for the last carry
	digits := make([]int16, len(ps)*windows)
	for i := range ps {
		z := zs[16*i : 16*i+16]
		carry := 0
		for w := range windows {
			v := carry
			for b := range c {
				if bit := w*c + b; bit < 128 && z[bit/8]>>(bit%8)&1 == 1 {
					v += 1 << b
				}
			}
			carry = 0
			if v >= 1<<(c-1) {
				v -= 1 << c
				carry = 1
			}
			digits[i*windows+w] = int16(v)
		}
	}
	buckets := make([]edwards25519.Point, 1<<(c-1))
	used := make([]bool, len(buckets))
	acc := edwards25519.NewIdentityPoint()
	running, sum := new(edwards25519.Point), new(edwards25519.Point)
	for w := windows - 1; w >= 0; w-- {
		for range c {
			acc.Double(acc)
		}
		clear(used)
		for i := range ps {
			d := int(digits[i*windows+w])
			switch {
			case d > 0 && used[d-1]:
				buckets[d-1].Add(&buckets[d-1], &ps[i])
			case d > 0:
				buckets[d-1].Set(&ps[i])
				used[d-1] = true
			case d < 0 && used[-d-1]:
				buckets[-d-1].Subtract(&buckets[-d-1], &ps[i])
			case d < 0:
				buckets[-d-1].Negate(&ps[i])
				used[-d-1] = true
			}
		}
		// Σ j·bucket[j] as a running sum from the top bucket down.
		running.Set(edwards25519.NewIdentityPoint())
		sum.Set(running)
		for j := len(buckets) - 1; j >= 0; j-- {
			if used[j] {
				running.Add(running, &buckets[j])
			}
			sum.Add(sum, running)
		}
		acc.Add(acc, sum)
	}
	return acc
}

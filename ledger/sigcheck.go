package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"hash"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
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
// the windowed-NAF method edwards25519 offers. The points are added to
// the buckets in the affine form decoded signatures' R come in (mixed
// additions, 7 field multiplications instead of 9; see extPoint).
func msm128(zs []byte, ps []edwards25519.Point) *edwards25519.Point {
	c := msmWindowBits(len(ps))
	windows := (128+c-1)/c + 1 // one more for the last carry
	digits := signedDigits(zs, len(ps), c, windows)
	b := newBucketSet(ps, c)
	acc := edwards25519.NewIdentityPoint()
	var P edwards25519.Point
	for w := windows - 1; w >= 0; w-- {
		for range c {
			acc.Double(acc)
		}
		b.fill(digits, windows, w)
		acc.Add(acc, b.weightedSum(&P))
	}
	return acc
}

// msmWindowBits is the digit width msm128 uses for n points: wider windows
// mean fewer additions per point but 2^c more per window, so they pay only
// for larger batches.
func msmWindowBits(n int) int {
	switch {
	case n < 32:
		return 4
	case n < 256:
		return 6
	}
	return 8
}

// signedDigits writes each of the n 128-bit scalars in zs as windows signed
// digits of c bits, lowest first, each in [−2^(c−1), 2^(c−1)): a digit at
// or above the half is taken 2^c down and carries one into the next.
// Point i's digits are digits[i*windows : (i+1)*windows].
func signedDigits(zs []byte, n, c, windows int) []int16 {
	digits := make([]int16, n*windows)
	for i := range n {
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
	return digits
}

// bucketSet is msm128's working state for one window at a time: the points
// in affine form, one bucket per digit magnitude, which buckets this
// window has used and the highest of them.
type bucketSet struct {
	d2      *field.Element
	aff     []affinePoint
	buckets []extPoint
	used    []bool
	top     int // the highest bucket used, −1 if none
}

// newBucketSet prepares the points of ps for buckets of c-bit digits.
func newBucketSet(ps []edwards25519.Point, c int) bucketSet {
	d2 := curveD2()
	aff := make([]affinePoint, len(ps))
	for i := range ps {
		aff[i].set(&ps[i], d2)
	}
	return bucketSet{d2: d2, aff: aff, buckets: make([]extPoint, 1<<(c-1)), used: make([]bool, 1<<(c-1))}
}

// fill empties the buckets and adds each point to the bucket of its digit
// in window w (its negation for a negative digit; none for a zero digit).
func (s *bucketSet) fill(digits []int16, windows, w int) {
	aff, buckets, used := s.aff, s.buckets, s.used
	clear(used)
	top := -1
	for i := range aff {
		d := int(digits[i*windows+w])
		neg := d < 0
		if neg {
			d = -d
		}
		if d == 0 {
			continue
		}
		if used[d-1] {
			buckets[d-1].addAffine(&aff[i], neg)
		} else {
			buckets[d-1].setAffine(&aff[i], neg)
			used[d-1] = true
			top = max(top, d-1)
		}
	}
	s.top = top
}

// weightedSum sets P to Σ (j+1)·bucket[j] over the buckets fill used, as
// a running sum from the top bucket down: each bucket is added once to the
// running sum and the running sum once per bucket to the total. It
// returns P.
func (s *bucketSet) weightedSum(P *edwards25519.Point) *edwards25519.Point {
	var running, sum extPoint
	var cached cachedPoint
	running.identity()
	sum.identity()
	for j := s.top; j >= 0; j-- {
		if s.used[j] {
			cached.set(&s.buckets[j], s.d2)
			running.add(&cached)
		}
		cached.set(&running, s.d2)
		sum.add(&cached)
	}
	if _, err := P.SetExtendedCoordinates(&sum.X, &sum.Y, &sum.Z, &sum.T); err != nil {
		panic("ledger: multi-scalar multiplication left the curve") // a bug, not bad input
	}
	return P
}

// The curve arithmetic below follows the ref10 formulas for twisted
// Edwards curves with a = −1 (Hisil–Wong–Carter–Dawson, "Twisted Edwards
// curves revisited", §3.1 and §4.2), on edwards25519's field elements.

// curveD2 returns 2d, d = −121665/121666 the edwards25519 curve constant.
func curveD2() *field.Element {
	var num, den field.Element
	if _, err := num.SetBytes(le32(121665)); err != nil {
		panic(err)
	}
	if _, err := den.SetBytes(le32(121666)); err != nil {
		panic(err)
	}
	d := new(field.Element).Invert(&den)
	d.Multiply(d, &num)
	d.Negate(d)
	return d.Add(d, d)
}

func le32(n uint32) []byte {
	b := make([]byte, 32)
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return b
}

// extPoint is a point in extended coordinates (X:Y:Z:T): x = X/Z,
// y = Y/Z, x·y = T/Z.
type extPoint struct{ X, Y, Z, T field.Element }

// affinePoint is a point with Z = 1, kept both ways: its coordinates, to
// start a bucket, and (y+x, y−x, 2d·x·y), to add it to one.
type affinePoint struct {
	x, y, t              field.Element
	yPlusX, yMinusX, t2d field.Element
}

// cachedPoint is an extPoint prepared for an addition: (Y+X, Y−X, Z, 2d·T).
type cachedPoint struct{ yPlusX, yMinusX, z, t2d field.Element }

func (p *extPoint) identity() {
	p.X.Zero()
	p.Y.One()
	p.Z.One()
	p.T.Zero()
}

// set sets a from p, dividing by Z if it is not 1 (a decoded point's Z is
// 1).
func (a *affinePoint) set(p *edwards25519.Point, d2 *field.Element) {
	X, Y, Z, T := p.ExtendedCoordinates()
	if Z.Equal(new(field.Element).One()) != 1 {
		inv := new(field.Element).Invert(Z)
		X.Multiply(X, inv)
		Y.Multiply(Y, inv)
		T.Multiply(T, inv)
	}
	a.x.Set(X)
	a.y.Set(Y)
	a.t.Set(T)
	a.yPlusX.Add(Y, X)
	a.yMinusX.Subtract(Y, X)
	a.t2d.Multiply(T, d2)
}

// setAffine sets p to a, or to −a if neg.
func (p *extPoint) setAffine(a *affinePoint, neg bool) {
	p.Y.Set(&a.y)
	p.Z.One()
	if neg {
		p.X.Negate(&a.x)
		p.T.Negate(&a.t)
	} else {
		p.X.Set(&a.x)
		p.T.Set(&a.t)
	}
}

// addAffine sets p to p + a, or p − a if neg (ref10's ge_madd, ge_msub).
func (p *extPoint) addAffine(a *affinePoint, neg bool) {
	var pp, mm, tt, zz field.Element
	pp.Add(&p.Y, &p.X)
	mm.Subtract(&p.Y, &p.X)
	if neg {
		pp.Multiply(&pp, &a.yMinusX)
		mm.Multiply(&mm, &a.yPlusX)
	} else {
		pp.Multiply(&pp, &a.yPlusX)
		mm.Multiply(&mm, &a.yMinusX)
	}
	tt.Multiply(&p.T, &a.t2d)
	zz.Add(&p.Z, &p.Z)
	if neg {
		p.complete(&pp, &mm, &zz, &tt, true)
	} else {
		p.complete(&pp, &mm, &zz, &tt, false)
	}
}

// set prepares p for an addition.
func (c *cachedPoint) set(p *extPoint, d2 *field.Element) {
	c.yPlusX.Add(&p.Y, &p.X)
	c.yMinusX.Subtract(&p.Y, &p.X)
	c.z.Set(&p.Z)
	c.t2d.Multiply(&p.T, d2)
}

// add sets p to p + q (ref10's ge_add).
func (p *extPoint) add(q *cachedPoint) {
	var pp, mm, tt, zz field.Element
	pp.Add(&p.Y, &p.X)
	mm.Subtract(&p.Y, &p.X)
	pp.Multiply(&pp, &q.yPlusX)
	mm.Multiply(&mm, &q.yMinusX)
	tt.Multiply(&p.T, &q.t2d)
	zz.Multiply(&p.Z, &q.z)
	zz.Add(&zz, &zz)
	p.complete(&pp, &mm, &zz, &tt, false)
}

// complete finishes an addition from PP = (Y₁+X₁)(Y₂±X₂),
// MM = (Y₁−X₁)(Y₂∓X₂), ZZ2 = 2·Z₁·Z₂ and TT = T₁·(±2d·T₂): the completed
// point (PP−MM : PP+MM : ZZ2±TT : ZZ2∓TT) in extended coordinates.
func (p *extPoint) complete(pp, mm, zz2, tt *field.Element, neg bool) {
	var x, y, z, t field.Element
	x.Subtract(pp, mm)
	y.Add(pp, mm)
	if neg {
		z.Subtract(zz2, tt)
		t.Add(zz2, tt)
	} else {
		z.Add(zz2, tt)
		t.Subtract(zz2, tt)
	}
	p.X.Multiply(&x, &t)
	p.Y.Multiply(&y, &z)
	p.Z.Multiply(&z, &t)
	p.T.Multiply(&x, &y)
}

package ledger

import (
	"crypto/ed25519"
	"crypto/sha512"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"filippo.io/edwards25519"
)

func testCheckpoints(t *testing.T, priv ed25519.PrivateKey, n int) []cpEntry {
	t.Helper()
	cps := make([]cpEntry, n)
	for i := range cps {
		seq := uint64(16 * (i + 1))
		cp := signCheckpoint(priv, seq, Hash{byte(i), byte(i >> 8), 7}, time.Unix(0, int64(1e15)+int64(i)).UTC())
		cps[i] = cpEntry{key: seq, cp: cp, ok: true}
	}
	return cps
}

// ellPlus returns the 32-byte little-endian s + ℓ: the same scalar, not reduced.
func ellPlus(s []byte) []byte {
	ell, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	le := slices.Clone(s)
	slices.Reverse(le)
	v := new(big.Int).Add(new(big.Int).SetBytes(le), ell)
	out := v.FillBytes(make([]byte, 32))
	slices.Reverse(out)
	return out
}

// TestSigCheckerAgreesWithCryptoEd25519 checks that the checker accepts and
// refuses exactly what crypto/ed25519 does for signatures a signer makes and
// for every kind of damage to them, alone and inside a batch.
func TestSigCheckerAgreesWithCryptoEd25519(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	good := testCheckpoints(t, priv, 1)[0].cp
	mod := func(f func(c *Checkpoint)) Checkpoint {
		c := good
		c.Signature = slices.Clone(good.Signature)
		f(&c)
		return c
	}
	yMinusOne := append([]byte{0xec}, slices.Repeat([]byte{0xff}, 31)...)
	yMinusOne[31] = 0x7f
	cases := []struct {
		name string
		cp   Checkpoint
		want bool
	}{
		{"valid", good, true},
		{"R bit flipped", mod(func(c *Checkpoint) { c.Signature[3] ^= 0x10 }), false},
		{"S bit flipped", mod(func(c *Checkpoint) { c.Signature[40] ^= 0x01 }), false},
		{"seq changed", mod(func(c *Checkpoint) { c.Seq++ }), false},
		{"chain hash changed", mod(func(c *Checkpoint) { c.ChainHash[31] ^= 1 }), false},
		{"time changed", mod(func(c *Checkpoint) { c.Time = c.Time.Add(time.Nanosecond) }), false},
		{"another key", signCheckpoint(other, good.Seq, good.ChainHash, good.Time), false},
		{"S not reduced", mod(func(c *Checkpoint) { copy(c.Signature[32:], ellPlus(c.Signature[32:])) }), false},
		{"R is y = p+1 (non-canonical 1)", mod(func(c *Checkpoint) {
			copy(c.Signature[:32], append([]byte{0xee}, yMinusOne[1:]...))
		}), false},
		{"R is x = 0 with the sign bit", mod(func(c *Checkpoint) {
			copy(c.Signature[:32], yMinusOne)
			c.Signature[31] |= 0x80
		}), false},
		{"short signature", mod(func(c *Checkpoint) { c.Signature = c.Signature[:63] }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			std := len(tc.cp.Signature) == ed25519.SignatureSize &&
				ed25519.Verify(pub, CheckpointMessage(tc.cp.Seq, tc.cp.ChainHash, tc.cp.Time), tc.cp.Signature)
			if std != tc.want {
				t.Fatalf("crypto/ed25519 says %v, the case expects %v", std, tc.want)
			}
			sc := newSigChecker(pub)
			if got := sc.verify(&tc.cp); got != tc.want {
				t.Errorf("verify = %v, want %v", got, tc.want)
			}
			batch := testCheckpoints(t, priv, 9)
			batch[4].cp = tc.cp
			if got := sc.verifyBatch(batch); got != tc.want {
				t.Errorf("verifyBatch = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSigCheckerBatches(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	sc := newSigChecker(pub)
	cps := testCheckpoints(t, priv, 131)
	if !sc.verifyBatch(cps) {
		t.Fatal("a batch of valid signatures does not verify")
	}
	if !sc.verifyBatch(nil) {
		t.Error("an empty batch does not verify")
	}
	// Undecoded checkpoints carry no signature and are skipped.
	cps[5] = cpEntry{key: cps[5].key}
	if !sc.verifyBatch(cps) {
		t.Error("a batch with an undecoded checkpoint does not verify")
	}
	// Two signatures swapped between checkpoints: each is valid, just not
	// for its checkpoint.
	cps[7].cp.Signature, cps[8].cp.Signature = cps[8].cp.Signature, cps[7].cp.Signature
	if sc.verifyBatch(cps) {
		t.Error("a batch with swapped signatures verifies")
	}
	cps[7].cp.Signature, cps[8].cp.Signature = cps[8].cp.Signature, cps[7].cp.Signature
	cps[100].cp = signCheckpoint(other, cps[100].cp.Seq, cps[100].cp.ChainHash, cps[100].cp.Time)
	if sc.verifyBatch(cps) {
		t.Error("a batch with one checkpoint signed by another key verifies")
	}
	if bad := newSigChecker(pub[:31]); bad.verifyBatch(cps[:3]) || bad.verify(&cps[0].cp) {
		t.Error("a malformed public key verifies signatures")
	}
}

// TestSigCheckerIsCofactored records the one place the checker parts from
// crypto/ed25519: a signature whose R has a small-order component, which
// only the key's holder can make, satisfies RFC 8032's cofactored equation
// (which batches soundly) and not the cofactorless one.
func TestSigCheckerIsCofactored(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	h := sha512.Sum512(priv.Seed())
	s, err := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	r, _ := new(edwards25519.Scalar).SetUniformBytes(slices.Repeat([]byte{0x5a}, 64))
	// T = (0, −1), the point of order 2.
	tb := append([]byte{0xec}, slices.Repeat([]byte{0xff}, 31)...)
	tb[31] = 0x7f
	T, err := new(edwards25519.Point).SetBytes(tb)
	if err != nil {
		t.Fatal(err)
	}
	R := new(edwards25519.Point).ScalarBaseMult(r)
	R.Add(R, T)
	cp := Checkpoint{Seq: 16, ChainHash: Hash{1}, Time: time.Unix(0, 1e15).UTC()}
	msg := CheckpointMessage(cp.Seq, cp.ChainHash, cp.Time)
	kh := sha512.New()
	kh.Write(R.Bytes())
	kh.Write(pub)
	kh.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(kh.Sum(nil))
	S := new(edwards25519.Scalar).MultiplyAdd(k, s, r)
	cp.Signature = append(R.Bytes(), S.Bytes()...)
	if ed25519.Verify(pub, msg, cp.Signature) {
		t.Fatal("crypto/ed25519 accepts a signature with a small-order R component")
	}
	sc := newSigChecker(pub)
	if !sc.verify(&cp) || !sc.verifyBatch([]cpEntry{{key: 16, cp: cp, ok: true}}) {
		t.Error("the cofactored check refuses a signature that satisfies [8][S]B = [8]R + [8][k]A")
	}
}

// TestCanonicalPoint checks canonicalPoint against re-encoding for every
// y near 0 and near p (where the non-canonical encodings live), both signs.
func TestCanonicalPoint(t *testing.T) {
	t.Parallel()
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	var ys []*big.Int
	for d := range int64(40) {
		ys = append(ys, big.NewInt(d), new(big.Int).Add(new(big.Int).Sub(p, big.NewInt(20)), big.NewInt(d)))
	}
	decoded := 0
	for _, y := range ys {
		for sign := range 2 {
			b := y.FillBytes(make([]byte, 32))
			slices.Reverse(b)
			b[31] |= byte(sign << 7)
			P, err := new(edwards25519.Point).SetBytes(b)
			if err != nil {
				continue
			}
			decoded++
			if want := slices.Equal(P.Bytes(), b); canonicalPoint(b) != want {
				t.Errorf("canonicalPoint(%x) = %v, re-encoding says %v", b, !want, want)
			}
		}
	}
	if decoded < 20 {
		t.Fatalf("only %d encodings decoded; the test checks too little", decoded)
	}
}

// TestMSM128 checks the bucket method against edwards25519's own
// multi-scalar multiplication at each window width it picks.
func TestMSM128(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 31, 40, 300} {
		zs := make([]byte, 16*n)
		ps := make([]edwards25519.Point, n)
		sc := make([]*edwards25519.Scalar, n)
		pp := make([]*edwards25519.Point, n)
		for i := range n {
			for j := range 16 {
				zs[16*i+j] = byte(i*31 + j*7 + n)
			}
			if i%3 == 0 { // all-ones scalars exercise every carry
				copy(zs[16*i:16*i+16], slices.Repeat([]byte{0xff}, 16))
			}
			var wide [64]byte
			wide[0], wide[1] = byte(i), byte(n)
			s, _ := new(edwards25519.Scalar).SetUniformBytes(wide[:])
			ps[i].ScalarBaseMult(s)
			var zb [32]byte
			copy(zb[:], zs[16*i:16*i+16])
			sc[i], _ = new(edwards25519.Scalar).SetCanonicalBytes(zb[:])
			pp[i] = &ps[i]
		}
		want := new(edwards25519.Point).VarTimeMultiScalarMult(sc, pp)
		if got := msm128(zs, ps); got.Equal(want) != 1 {
			t.Errorf("n=%d: msm128 disagrees with VarTimeMultiScalarMult", n)
		}
	}
}

// BenchmarkMSM128 measures the batch check's multi-scalar multiplication
// alone, at a batch size for each window width it picks, on points decoded
// from their encodings as a signature's R is.
func BenchmarkMSM128(b *testing.B) {
	for _, n := range []int{16, 100, maxSigBatch} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			zs := make([]byte, 16*n)
			ps := make([]edwards25519.Point, n)
			for i := range n {
				for j := range 16 {
					zs[16*i+j] = byte(i*31 + j*7 + n)
				}
				var wide [64]byte
				wide[0], wide[1], wide[2] = byte(i), byte(i>>8), byte(n)
				s, _ := new(edwards25519.Scalar).SetUniformBytes(wide[:])
				P := new(edwards25519.Point).ScalarBaseMult(s)
				if _, err := ps[i].SetBytes(P.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				msm128(zs, ps)
			}
		})
	}
}

package hdfscrc

import "hash/crc32"

// The arithmetic below works on CRC-32C values as polynomials over GF(2),
// reduced modulo the Castagnoli generator P. CRCs use the reflected
// (LSB-first) convention of hash/crc32: bit 31 of a uint32 holds the
// coefficient of x^0 and bit 0 that of x^31.
//
// For a CRC with equal initial value and final XOR (all ones for CRC-32C),
// the CRC of a concatenation A‖B satisfies
//
//	crc(A‖B) = crc(A)·x^(8·len(B)) + crc(B)   (mod P)
//
// because the conditioning terms of A cancel out once they are shifted past
// B, leaving only B's own conditioning, which crc(B) already carries.

// one is the polynomial 1 (x^0) in reflected representation.
const one uint32 = 1 << 31

// mulX returns p·x mod P.
func mulX(p uint32) uint32 {
	if p&1 != 0 { // the x^31 term overflows into x^32 ≡ P - x^32
		return p>>1 ^ crc32.Castagnoli
	}
	return p >> 1
}

// mulMod returns a·b mod P.
func mulMod(a, b uint32) uint32 {
	var prod uint32
	// Walk a's coefficients from x^0 upwards while b runs through b·x^i.
	for ; a != 0; a <<= 1 {
		if a&one != 0 {
			prod ^= b
		}
		b = mulX(b)
	}
	return prod
}

// xPow8n returns x^(8n) mod P, the factor that shifts a CRC past n bytes,
// by square-and-multiply over the bits of n.
func xPow8n(n uint64) uint32 {
	result := one
	base := one >> 8 // x^8
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			result = mulMod(result, base)
		}
		base = mulMod(base, base)
	}
	return result
}

// Combine returns the CRC-32C (Castagnoli, as hash/crc32 computes it) of
// the concatenation A‖B, given crcA, the CRC-32C of A, and crcB and lenB,
// the CRC-32C and length in bytes of B. The length of A is not needed.
// Combine(0, crc, n) is crc, so a whole-file CRC can be folded from zero
// over its pieces in order. Combine panics if lenB is negative.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB < 0 {
		panic("hdfscrc: Combine with negative length")
	}
	return mulMod(crcA, xPow8n(uint64(lenB))) ^ crcB
}

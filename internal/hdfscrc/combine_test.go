package hdfscrc

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func TestCombineRandomSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for range 2000 {
		n := r.IntN(len(data) + 1)
		buf := data[:n]
		cut := r.IntN(n + 1)
		a, b := buf[:cut], buf[cut:]
		got := Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if want := crc32.Checksum(buf, castagnoli); got != want {
			t.Fatalf("len %d cut at %d: Combine = %08x, want %08x", n, cut, got, want)
		}
	}
}

func TestCombineManyPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	want := crc32.Checksum(data, castagnoli)
	for range 20 {
		var crc uint32
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(1<<20))
			crc = Combine(crc, crc32.Checksum(rest[:n], castagnoli), int64(n))
			rest = rest[n:]
		}
		if crc != want {
			t.Fatalf("folded CRC = %08x, want %08x", crc, want)
		}
	}
}

func TestCombineEdges(t *testing.T) {
	if got := Combine(0xdeadbeef, 0, 0); got != 0xdeadbeef {
		t.Errorf("Combine(a, 0, 0) = %08x, want a", got)
	}
	if got := Combine(0, 0x12345678, 99); got != 0x12345678 {
		t.Errorf("Combine(0, b, n) = %08x, want b", got)
	}
	// A long run of zero bytes exercises the high bits of the length.
	zeros := make([]byte, 5<<20)
	head := []byte("hdfs")
	want := crc32.Checksum(append(head, zeros...), castagnoli)
	got := Combine(crc32.Checksum(head, castagnoli), crc32.Checksum(zeros, castagnoli), int64(len(zeros)))
	if got != want {
		t.Errorf("Combine over 5 MiB of zeros = %08x, want %08x", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("Combine with negative length did not panic")
		}
	}()
	Combine(1, 2, -1)
}

func TestMulMod(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		a, b, c := r.Uint32(), r.Uint32(), r.Uint32()
		if mulMod(a, one) != a || mulMod(one, a) != a {
			t.Fatalf("1 is not the identity for %08x", a)
		}
		if mulMod(a, b) != mulMod(b, a) {
			t.Fatalf("not commutative: %08x, %08x", a, b)
		}
		if mulMod(a, b^c) != mulMod(a, b)^mulMod(a, c) {
			t.Fatalf("not distributive: %08x, %08x, %08x", a, b, c)
		}
	}
	// x^32 ≡ P - x^32, which is crc32.Castagnoli in reflected form.
	if got := mulMod(xPow8n(2), xPow8n(2)); got != crc32.Castagnoli {
		t.Errorf("x^32 mod P = %08x, want %08x", got, uint32(crc32.Castagnoli))
	}
}

func BenchmarkCombine(b *testing.B) {
	for b.Loop() {
		Combine(0x01020304, 0x05060708, 128<<20)
	}
}

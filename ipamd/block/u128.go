package block

import (
	"math"
	"math/bits"
	"net/netip"
)

// u128 is an address as a 128-bit unsigned integer, for block arithmetic on IPv6.
type u128 struct{ hi, lo uint64 }

func fromAddr(a netip.Addr) u128 {
	b := a.As16()
	var u u128
	for i := range 8 {
		u.hi = u.hi<<8 | uint64(b[i])
		u.lo = u.lo<<8 | uint64(b[8+i])
	}
	return u
}

func (u u128) addr(is4 bool) netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[7-i] = byte(u.hi >> (8 * i))
		b[15-i] = byte(u.lo >> (8 * i))
	}
	a := netip.AddrFrom16(b)
	if is4 {
		return a.Unmap()
	}
	return a
}

func (u u128) add(n uint64) u128 {
	lo, carry := bits.Add64(u.lo, n, 0)
	return u128{u.hi + carry, lo}
}

// addShifted adds i<<shift.
func (u u128) addShifted(i uint64, shift uint) u128 {
	off := u128{0, i}.shl(shift)
	lo, carry := bits.Add64(u.lo, off.lo, 0)
	return u128{u.hi + off.hi + carry, lo}
}

func (u u128) sub(v u128) u128 {
	lo, borrow := bits.Sub64(u.lo, v.lo, 0)
	return u128{u.hi - v.hi - borrow, lo}
}

func (u u128) shr(n uint) u128 {
	if n == 0 {
		return u
	}
	if n >= 64 {
		return u128{0, u.hi >> (n - 64)}
	}
	return u128{u.hi >> n, u.lo>>n | u.hi<<(64-n)}
}

func (u u128) shl(n uint) u128 {
	if n == 0 {
		return u
	}
	if n >= 64 {
		return u128{u.lo << (n - 64), 0}
	}
	return u128{u.hi<<n | u.lo>>(64-n), u.lo << n}
}

// uint64 saturates: a count of blocks beyond 2^64 is not reachable by any index.
func (u u128) uint64() uint64 {
	if u.hi != 0 {
		return math.MaxUint64
	}
	return u.lo
}

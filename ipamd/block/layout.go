package block

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/netip"
	"strings"

	"go4.org/netipx"

	"github.com/nicpool/nicpool/ipamd/allocator"
)

// SizeBits is log2 of a block's size: 16 addresses. Small blocks keep what one node
// holds but does not use small, so a pool sized exactly for its pods needs little
// borrowing between nodes; the size is the same for every pool, so a block's place
// never depends on anything that can change.
const SizeBits = 4

// Prefix returns the prefix length of a subnet's blocks: 16 addresses, or the whole
// subnet when it is smaller.
func Prefix(subnet netip.Prefix) int {
	return max(subnet.Addr().BitLen()-SizeBits, subnet.Bits())
}

// Of returns the block of subnet that holds a.
func Of(subnet netip.Prefix, a netip.Addr) netip.Prefix {
	p, _ := a.Prefix(Prefix(subnet))
	return p
}

// Name returns the IPBlock object name of a pool's block: the pool's name and the
// block's first address ("blue.10.6.0.16", "blue.fd000006000000000000000000000010").
// A pool name too long to leave room is shortened with a hash of it; spec.pool always
// carries the full name.
func Name(pool string, blk netip.Prefix) string {
	var addr string
	if blk.Addr().Is4() {
		addr = blk.Addr().String()
	} else {
		b := blk.Addr().As16()
		addr = hex.EncodeToString(b[:])
	}
	const maxName = 253
	if len(pool)+1+len(addr) > maxName {
		sum := sha256.Sum256([]byte(pool))
		keep := maxName - 1 - len(addr) - 1 - 16
		pool = strings.TrimRight(pool[:keep], ".-") + "-" + hex.EncodeToString(sum[:8])
	}
	return pool + "." + addr
}

// Layout is the blocks a pool can have: every block of its subnet that holds at least
// one allocatable address, numbered from 0 in address order.
type Layout struct {
	Subnet netip.Prefix
	Bits   int // prefix length of a block
	spans  []span
	count  uint64
}

// span is a run of consecutive blocks.
type span struct {
	first u128   // first address of the first block
	n     uint64 // blocks in the run
}

// NewLayout returns the layout of a pool's range.
func NewLayout(r *allocator.Range) *Layout {
	l := &Layout{Subnet: r.Subnet, Bits: Prefix(r.Subnet)}
	shift := uint(r.Subnet.Addr().BitLen() - l.Bits)
	var last u128
	have := false
	for _, rg := range r.Allocatable.Ranges() {
		first := fromAddr(Of(r.Subnet, rg.From()).Addr())
		end := fromAddr(Of(r.Subnet, rg.To()).Addr())
		if have && first == last {
			// The range starts in the block the previous one ended in.
			if first == end {
				continue
			}
			first = first.add(1 << shift)
		}
		n := end.sub(first).shr(shift).uint64()
		if n != math.MaxUint64 {
			n++
		}
		l.spans = append(l.spans, span{first: first, n: n})
		l.count = satAdd(l.count, n)
		last, have = end, true
	}
	return l
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// Count is the number of blocks (saturating at 2^64-1 for huge IPv6 ranges).
func (l *Layout) Count() uint64 { return l.count }

// At returns block i (0 ≤ i < Count()).
func (l *Layout) At(i uint64) netip.Prefix {
	shift := uint(l.Subnet.Addr().BitLen() - l.Bits)
	for _, s := range l.spans {
		if i < s.n {
			a := s.first.addShifted(i, shift).addr(l.Subnet.Addr().Is4())
			return netip.PrefixFrom(a, l.Bits)
		}
		i -= s.n
	}
	return netip.Prefix{}
}

// Index returns the number of a block in the layout, and false when the pool's range
// has no address in it.
func (l *Layout) Index(blk netip.Prefix) (uint64, bool) {
	if blk.Bits() != l.Bits || blk.Addr().Is4() != l.Subnet.Addr().Is4() {
		return 0, false
	}
	shift := uint(l.Subnet.Addr().BitLen() - l.Bits)
	a := fromAddr(blk.Addr())
	var base uint64
	for _, s := range l.spans {
		if !lessU(a, s.first) {
			k := a.sub(s.first).shr(shift).uint64()
			if k < s.n {
				return base + k, true
			}
		}
		base = satAdd(base, s.n)
	}
	return 0, false
}

func lessU(a, b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

// Addresses returns the allocatable addresses of a block, in order.
func Addresses(r *allocator.Range, blk netip.Prefix) []netip.Addr {
	var out []netip.Addr
	from, to := blk.Masked().Addr(), netipx.PrefixLastIP(blk)
	for a := from; a.IsValid() && !to.Less(a); a = a.Next() {
		if r.Allocatable.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

// AddrOfName returns the first address of the block an IPBlock name stands for (see
// Name), and false when the name is not of that form.
func AddrOfName(name string, is4 bool) (netip.Addr, bool) {
	labels := strings.Split(name, ".")
	if is4 {
		if len(labels) < 5 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(strings.Join(labels[len(labels)-4:], "."))
		return a, err == nil && a.Is4()
	}
	last := labels[len(labels)-1]
	if len(labels) < 2 || len(last) != 32 {
		return netip.Addr{}, false
	}
	b, err := hex.DecodeString(last)
	if err != nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte(b)), true
}

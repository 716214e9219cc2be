package analytics

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/bits"
)

// sketch is a HyperLogLog sketch of 256 registers: it estimates how many distinct install ids were
// added (standard error about 1.04/sqrt(256) = 6.5%) without keeping any of them.
type sketch [256]uint8

func (s *sketch) add(id string) {
	h := sha256.Sum256([]byte(id))
	x := binary.BigEndian.Uint64(h[:8])
	idx := x >> 56
	rho := uint8(bits.LeadingZeros64(x<<8|1<<7) + 1) // the 56 bits after the index; at most 57
	if rho > s[idx] {
		s[idx] = rho
	}
}

func (s *sketch) merge(o *sketch) {
	for i, r := range o {
		if r > s[i] {
			s[i] = r
		}
	}
}

// estimate is the HyperLogLog estimate with the small-range (linear counting) correction.
func (s *sketch) estimate() int64 {
	const m = float64(len(s))
	alpha := 0.7213 / (1 + 1.079/m)
	sum, zeros := 0.0, 0
	for _, r := range s {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := alpha * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros))
	}
	return int64(math.Round(e))
}

package config

import (
	"math"
	"strconv"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
)

// sizeUnits lists the accepted suffixes, longest first so "KiB" wins over "B". The
// "i" units are powers of 1024 and the others powers of 1000, as on disk labels, so
// "10MB" means what a person reading it expects.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"b", 1},
}

// ParseSize parses a byte size: a decimal integer optionally followed by B, KiB, MiB,
// GiB (powers of 1024) or KB, MB, GB (powers of 1000), units in any case, "256KiB" or
// "256 KiB". A plain integer is bytes. Fractions, signs and values beyond int64 are
// rejected with an *Error of code EINVALID.
func ParseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	lower := strings.ToLower(num)
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.bytes
			break
		}
	}
	if num == "" || strings.Trim(num, "0123456789") != "" {
		return 0, ledger.Errorf(ledger.EINVALID, "%q is not a size like 512B, 256KiB or 10MB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, ledger.Errorf(ledger.EINVALID, "size %q is too large", s)
	}
	return n * mult, nil
}

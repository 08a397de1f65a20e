package config

import (
	"math"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     int64
	}{
		{"PlainIntegerIsBytes", "2048", 2048},
		{"Bytes", "512B", 512},
		{"KibibytesAre1024", "256KiB", 256 << 10},
		{"MebibytesAre1024Squared", "1MiB", 1 << 20},
		{"Gibibytes", "2GiB", 2 << 30},
		{"KilobytesAre1000", "10KB", 10_000},
		{"MegabytesAre1000Squared", "10MB", 10_000_000},
		{"Gigabytes", "1GB", 1_000_000_000},
		{"UnitInAnyCase", "256kib", 256 << 10},
		{"SpaceBeforeUnit", "25 MB", 25_000_000},
		{"Zero", "0", 0},
		{"LargestPlain", "9223372036854775807", math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseSizeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", "B", "KiB", "-1", "-1KiB", "+1", "1.5MiB", "1e3", "1 TB", "1K", "abc", "1MiBs",
		"9223372036854775808",  // one past int64
		"8589934592GiB",        // 2^33 GiB = 2^63 bytes
		"99999999999999999999", // past any integer type
	} {
		if n, err := ParseSize(in); ledger.ErrorCode(err) != ledger.EINVALID {
			t.Errorf("ParseSize(%q) = %d, %v; want an EINVALID error", in, n, err)
		}
	}
}

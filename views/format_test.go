package views

import "testing"

// A count reads as it is known: exact, an estimate to two figures, or a lower
// bound.
func TestCountWords(t *testing.T) {
	for _, c := range []struct {
		n           int64
		about, more bool
		want        string
	}{
		{52, false, false, "52"},
		{312_000, false, false, "312000"},
		{1000, false, true, "1000+"},
		{3005, true, false, "about 3005"},
		{12_345, true, false, "about 12k"},
		{312_187, true, false, "about 310k"},
		{99_400, true, false, "about 99k"},
		{1_234_567, true, false, "about 1.2M"},
		{10_400_000, true, false, "about 10M"},
		{2_000_000_000, true, false, "about 2B"},
	} {
		if got := countWords(c.n, c.about, c.more); got != c.want {
			t.Errorf("countWords(%d, %v, %v) = %q, want %q", c.n, c.about, c.more, got, c.want)
		}
	}
}

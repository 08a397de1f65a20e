package web

import (
	"bytes"
	"io"
	"testing"
)

// readAll returns the whole body whatever its declared length says, and sets
// aside no more than presize before the body arrives.
func TestReadAll(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		declared int64
	}{
		{"small, declared", 2300, 2300},
		{"larger than presize, declared", presize*2 + 17, presize*2 + 17},
		{"not declared", presize + 1, -1},
		{"empty", 0, 0},
	} {
		body := bytes.Repeat([]byte("x"), tc.size)
		// In small pieces, as a network hands them out.
		got, err := readAll(&trickle{r: bytes.NewReader(body)}, tc.declared)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("%s: read %d bytes, want %d", tc.name, len(got), len(body))
		}
	}
	// A client that declares a megabyte and sends nothing holds presize, not a megabyte.
	got, err := readAll(&trickle{r: bytes.NewReader(nil)}, 1<<20)
	if err != nil || len(got) != 0 || cap(got) > presize+1 {
		t.Errorf("declared 1 MiB, sent nothing: %d bytes, capacity %d, err %v; want capacity <= %d", len(got), cap(got), err, presize+1)
	}
}

// trickle reads at most 1000 bytes at a time.
type trickle struct{ r io.Reader }

func (t *trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), 1000)]) }

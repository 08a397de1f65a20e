package cutover

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The formats of a file of performed operations.
const (
	FormatJSONLines = "jsonl" // one JSON object a line
	FormatCSV       = "csv"   // what a spreadsheet exports: a header row, then one operation a row
)

// FormatOf is the format a file's name says: csv for a .csv file, else JSON lines.
func FormatOf(name string) string {
	if strings.HasSuffix(strings.ToLower(name), ".csv") {
		return FormatCSV
	}
	return FormatJSONLines
}

// source reads a file one operation at a time, so that a file of any length is
// read in bounded memory. next returns the operation and its line; a line that
// cannot be read as an operation comes back with the reason (bad) and the
// reading goes on; err ends the reading (io.EOF at the end).
type source interface {
	next() (p Performed, bad string, err error)
}

// newSource reads r in format.
func newSource(r io.Reader, format string) (source, error) {
	switch format {
	case FormatJSONLines, "":
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64*1024), MaxLine)
		return &jsonLines{sc: sc}, nil
	case FormatCSV:
		return newCSVRows(r)
	}
	return nil, fmt.Errorf("unknown format %q: use %s or %s", format, FormatJSONLines, FormatCSV)
}

// jsonLines is a file of JSON lines; blank lines and lines starting with # are
// skipped.
type jsonLines struct {
	sc   *bufio.Scanner
	line int
}

func (j *jsonLines) next() (Performed, string, error) {
	for j.sc.Scan() {
		j.line++
		text := bytes.TrimSpace(j.sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		p, err := decodeLine(text)
		p.Line = j.line
		if err != nil {
			return p, err.Error(), nil
		}
		return p, "", nil
	}
	if err := j.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Performed{}, "", fmt.Errorf("line %d is longer than %d bytes", j.line+1, MaxLine)
		}
		return Performed{}, "", err
	}
	return Performed{}, "", io.EOF
}

// csvRows is a CSV file whose first row names the columns: action, key (or
// key_1, key_2, ... for a key of several parts), external_ref, performed_at, and
// optionally params and result (JSON text). Other columns are refused, as an
// unknown field of a JSON line is.
type csvRows struct {
	r    *csv.Reader
	cols map[string]int
	keys []int // the columns of the key parts, in order
}

var keyColumn = regexp.MustCompile(`^key_([1-9][0-9]*)$`)

func newCSVRows(in io.Reader) (*csvRows, error) {
	r := csv.NewReader(in)
	r.FieldsPerRecord = 0 // every row as long as the header
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("read the header row: %w", err)
	}
	c := &csvRows{r: r, cols: map[string]int{}}
	numbered := map[int]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) // a spreadsheet's byte order mark
		switch {
		case h == "action" || h == "key" || h == "external_ref" || h == "performed_at" || h == "params" || h == "result":
			if _, dup := c.cols[h]; dup {
				return nil, fmt.Errorf("the header names the column %q twice", h)
			}
			c.cols[h] = i
		case keyColumn.MatchString(h):
			n, _ := strconv.Atoi(keyColumn.FindStringSubmatch(h)[1])
			numbered[n] = i
		default:
			return nil, fmt.Errorf("the header names an unknown column %q: use action, key (or key_1, key_2, ...), external_ref, performed_at, params, result", h)
		}
	}
	if k, ok := c.cols["key"]; ok {
		if len(numbered) > 0 {
			return nil, errors.New("the header has both key and key_1, key_2, ...: use one")
		}
		c.keys = []int{k}
	}
	for n := 1; n <= len(numbered); n++ {
		i, ok := numbered[n]
		if !ok {
			return nil, fmt.Errorf("the header's key columns skip key_%d", n)
		}
		c.keys = append(c.keys, i)
	}
	for _, need := range []string{"action", "external_ref", "performed_at"} {
		if _, ok := c.cols[need]; !ok {
			return nil, fmt.Errorf("the header has no %q column", need)
		}
	}
	if len(c.keys) == 0 {
		return nil, errors.New(`the header has no "key" column (or key_1, key_2, ...)`)
	}
	return c, nil
}

func (c *csvRows) next() (Performed, string, error) {
	rec, err := c.r.Read()
	var perr *csv.ParseError
	switch {
	case errors.As(err, &perr) && (errors.Is(perr.Err, csv.ErrFieldCount) || errors.Is(perr.Err, csv.ErrQuote) ||
		errors.Is(perr.Err, csv.ErrBareQuote)):
		return Performed{Line: perr.StartLine}, "not a row of the header's columns: " + perr.Err.Error(), nil
	case err != nil:
		return Performed{}, "", err // io.EOF at the end
	}
	line, _ := c.r.FieldPos(0)
	p := Performed{Line: line}
	field := func(name string) string {
		if i, ok := c.cols[name]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	p.Action, p.ExternalRef = field("action"), field("external_ref")
	for _, i := range c.keys {
		p.Key = append(p.Key, strings.TrimSpace(rec[i]))
	}
	if at := field("performed_at"); at != "" {
		if p.PerformedAt, err = time.Parse(time.RFC3339, at); err != nil {
			return p, fmt.Sprintf("performed_at %q is not a time like 2026-01-02T15:04:05Z", at), nil
		}
	}
	for name, dst := range map[string]*json.RawMessage{"params": &p.Params, "result": &p.Result} {
		if v := field(name); v != "" {
			if !json.Valid([]byte(v)) {
				return p, fmt.Sprintf("%s is not JSON: %q", name, v), nil
			}
			*dst = json.RawMessage(slices.Clone([]byte(v)))
		}
	}
	return p, "", nil
}

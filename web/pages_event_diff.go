package web

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/oncehook/oncehook/views"
)

// diffBodies compares two JSON bodies value by value: the values that differ (or
// that only one has), by JSON pointer, and how many are the same. A body that is
// not JSON is one value, its whole text.
func diffBodies(stored, other []byte) (changes []views.DiffRow, same int) {
	a, b := map[string]string{}, map[string]string{}
	flattenJSON(stored, a)
	flattenJSON(other, b)
	var paths []string
	for p := range a {
		paths = append(paths, p)
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		x, okA := a[p]
		y, okB := b[p]
		if okA && okB && x == y {
			same++
			continue
		}
		if !okA {
			x = "(absent)"
		}
		if !okB {
			y = "(absent)"
		}
		changes = append(changes, views.DiffRow{Name: p, Original: x, Other: y, Differs: true})
	}
	return changes, same
}

// flattenJSON puts every scalar of doc into out under its JSON pointer.
func flattenJSON(doc []byte, out map[string]string) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		out[""] = string(doc)
		return
	}
	flattenValue("", v, out)
}

func flattenValue(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flattenValue(path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), e, out)
		}
	case []any:
		for i, e := range x {
			flattenValue(path+"/"+strconv.Itoa(i), e, out)
		}
	default:
		b, _ := json.Marshal(x)
		out[path] = string(b)
	}
}

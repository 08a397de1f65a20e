package web

import (
	"bytes"
	"encoding/json"
	"maps"
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
	for _, p := range keysOfBoth(a, b) {
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

// keysOfBoth returns the keys of a and b, each once, sorted: the rows of a diff.
func keysOfBoth[A, B any](a map[string]A, b map[string]B) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

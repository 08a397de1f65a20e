package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// detailLabels name the audit details in people's words; the JSON API keeps the
// field names.
var detailLabels = map[string]string{
	"checked_destination": "checked the destination",
	"operation_key":       "operation key",
	"external_ref":        "external ref",
}

// detailWords turns an audit line's detail object into words: "operation key:
// op_1; checked the destination: yes". Anything that is not an object is shown
// as it is.
func detailWords(raw []byte) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return compactJSON(raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		label, ok := detailLabels[k]
		if !ok {
			label = strings.ReplaceAll(k, "_", " ")
		}
		var v string
		switch x := m[k].(type) {
		case bool:
			v = map[bool]string{true: "yes", false: "no"}[x]
		case string:
			if x == "" {
				continue
			}
			v = x
		case nil:
			continue
		default:
			b, _ := json.Marshal(x)
			v = string(b)
		}
		parts = append(parts, fmt.Sprintf("%s: %s", label, v))
	}
	return strings.Join(parts, "; ")
}

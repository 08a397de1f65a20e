package views

import (
	"net/url"
	"strconv"
	"strings"
)

func urlQuery(s string) string { return url.QueryEscape(s) }

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
func itoa32(n int32) string { return strconv.FormatInt(int64(n), 10) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// actLabel is an act's button label: "retry" reads Retry.
func actLabel(act string) string {
	if act == "" {
		return ""
	}
	return strings.ToUpper(act[:1]) + act[1:]
}

func about(estimate bool) string {
	if estimate {
		return "about "
	}
	return ""
}

// bucketName is what one bar of a trend window covers.
func bucketName(window string) string {
	switch window {
	case "hour":
		return "5 minutes"
	case "day":
		return "hour"
	}
	return "day"
}

package views

import "strconv"

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
func itoa32(n int32) string { return strconv.FormatInt(int64(n), 10) }

package views

// Stamp is a moment as the pages show it: the exact UTC time as text, which the
// script rewrites into the reader's time zone, keeping the UTC time on hover.
type Stamp struct {
	ISO string // RFC 3339, for <time datetime>; "" for no time
	UTC string // "2026-01-02 15:04:05 UTC"
}

// Age is how long ago a moment was: the server's figure, which the script keeps
// current while the page stays open.
type Age struct {
	ISO  string // when it started
	Text string // "3h 12m"
}

// sortArrow marks the order a sorted column is in.
func sortArrow(order string) string {
	if order == "ascending" {
		return " ▲"
	}
	return " ▼"
}

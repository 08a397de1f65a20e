package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the table. cpu says who kept the cores busy meanwhile.
type row struct {
	figure, value, ratio, target, met, cpu string
	key                                    string // for ratios filled in once the baseline is final
}

type table struct {
	machine               machine
	started               time.Time
	loadBefore, loadAfter string
	rows                  []row
	notes                 []string
}

func (t *table) add(r row) { t.rows = append(t.rows, r) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// check says whether a figure meets its target.
func check(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func (t *table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oncehook bench, %s (%s)\n", t.started.UTC().Format("2006-01-02 15:04 MST"), time.Since(t.started).Round(time.Second))
	fmt.Fprintf(&b, "machine: %s\n", t.machine)
	fmt.Fprintf(&b, "load average (1, 5, 15 min): %s before, %s after; the machine is shared\n\n", t.loadBefore, t.loadAfter)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tmeasured\tratio\ttarget\tmet\tCPU while measuring (100% = one core)")
	for _, r := range t.rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.figure, r.value, r.ratio, r.target, r.met, r.cpu)
	}
	w.Flush()
	if len(t.notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func perSec(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%s/s", thousands(int64(x+0.5)))
	default:
		return fmt.Sprintf("%.1f/s", x)
	}
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

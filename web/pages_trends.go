package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/views"
)

// Chart geometry, in SVG units.
const (
	chartWidth  = 240
	chartHeight = 48
)

// trendsPage serves /trends?window=hour|day|week (default day).
func (s *Server) trendsPage(c echo.Context) error {
	window := c.QueryParam("window")
	if window == "" {
		window = "day"
	}
	tr, err := s.review(c).Trends(c.Request().Context(), window)
	if err != nil {
		return err
	}
	m := views.TrendsPage{Window: window, From: stamp(tr.Since)}
	for _, w := range review.TrendWindows {
		m.Windows = append(m.Windows, views.Option{Value: "/trends?window=" + w.Name, Label: w.Name})
	}
	for _, q := range tr.Queues {
		m.Queues = append(m.Queues, trendChart("trend-queue-"+q.Queue, q.Queue, tr, []series{{"arrived", "new", q.Arrived}}, s.now()))
	}
	for _, d := range tr.Destinations {
		m.Dests = append(m.Dests, trendChart("trend-dest-"+d.Destination, d.Destination, tr,
			[]series{{"new actions", "new", d.New}, {"failed calls", "failed", d.Failed}}, s.now()))
	}
	return s.render(c, http.StatusOK, views.Trends(live(c, s.layout(c, "Trends", "trends")), m))
}

type series struct {
	name, class string
	counts      []int64
}

// trendChart lays out one chart: per bucket, one bar per series side by side,
// scaled to the largest count. Its summary says the totals in words, and whether
// the newest bucket's failures (or arrivals) are above the window's average.
func trendChart(id, title string, tr review.Trends, ss []series, now time.Time) views.Chart {
	c := views.Chart{ID: id, Title: title, Width: chartWidth, Height: chartHeight,
		Oldest: "1 " + tr.Window.Name + " ago"}
	n := len(ss[0].counts)
	for _, s := range ss {
		for _, v := range s.counts {
			c.Max = max(c.Max, v)
		}
		c.Legend = append(c.Legend, views.Option{Value: s.class, Label: s.name})
	}
	slot := chartWidth / n
	barW := max(1, (slot-1)/len(ss))
	var parts []string
	for si, s := range ss {
		var total int64
		for i, v := range s.counts {
			total += v
			if v == 0 {
				continue
			}
			h := int(int64(chartHeight-2) * v / c.Max)
			h = max(h, 1)
			from := tr.Since.Add(time.Duration(i) * tr.Window.Bucket)
			c.Bars = append(c.Bars, views.Bar{X: i*slot + si*barW, Y: chartHeight - 1 - h, W: barW, H: h, Class: "bar-" + s.class,
				Title: fmt.Sprintf("%s from %s UTC: %d", s.name, from.UTC().Format("Jan 2 15:04"), v)})
		}
		parts = append(parts, fmt.Sprintf("%d %s", total, s.name))
		// Worse: the two newest buckets of the last series (failures, or arrivals)
		// hold more than twice their share of the window. Two, because the newest
		// has only just begun when the clock moves into it.
		if si == len(ss)-1 && total > 0 && n >= 2 {
			recent := s.counts[n-1] + s.counts[n-2]
			c.Worse = recent > 0 && float64(recent) > 2*2*float64(total)/float64(n)
			// Once the newest bucket is a quarter through without a failure,
			// the failures have stopped: recovered, not worse.
			newest := tr.Since.Add(time.Duration(n-1) * tr.Window.Bucket)
			if s.class == "failed" && s.counts[n-1] == 0 && now.Sub(newest) >= tr.Window.Bucket/4 {
				c.Worse, c.Recovered = false, true
			}
		}
	}
	c.Summary = fmt.Sprintf("%s over the last %s", strings.Join(parts, ", "), tr.Window.Name)
	return c
}

package web

import (
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// routes is the whole route table.
func (s *Server) routes(e *echo.Echo) {
	e.Use(middleware.RequestID())
	e.Use(s.logRequests)
	e.Use(middleware.Recover())
	e.Use(securityHeaders(s.secure))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.serveMetrics)

	e.POST("/hooks/:source", s.ingest)

	api := e.Group("/api/v1", s.requireToken)
	api.GET("/actions", s.apiListActions)
	api.GET("/actions/:id", s.apiGetAction)
	api.POST("/actions/:id/correct", s.apiCorrect)
	api.POST("/actions/:id/approve-correction", s.apiDecideCorrection(true))
	api.POST("/actions/:id/refuse-correction", s.apiDecideCorrection(false))
	api.POST("/actions/:id/:act", s.apiAct)
	api.GET("/events", s.apiListEvents)
	api.GET("/events/:id", s.apiGetEvent)
	api.POST("/events/replay", s.apiReplayMatching)
	api.POST("/events/:id/replay", s.apiReplayEvent)
	api.GET("/summary", s.apiSummary)
	api.GET("/destinations", s.apiDestinations)
	api.POST("/destinations/:name/reconnect", s.apiReconnect)
	api.POST("/destinations/:name/breaker", s.apiBreakerChange)
	api.POST("/erase", s.apiErase)

	s.pageRoutes(e)
}

package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
)

// statusOf is the one map from domain error codes to HTTP statuses.
var statusOf = map[string]int{
	ledger.ENOTFOUND:     http.StatusNotFound,
	ledger.EINVALID:      http.StatusBadRequest,
	ledger.ECONFLICT:     http.StatusConflict,
	ledger.EUNAVAILABLE:  http.StatusServiceUnavailable,
	ledger.EUNAUTHORIZED: http.StatusUnauthorized,
	ledger.EFORBIDDEN:    http.StatusForbidden,
	ledger.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	ledger.ETIMEOUT:      http.StatusRequestTimeout,
	ledger.EINTERNAL:     http.StatusInternalServerError,
	ledger.ETHROTTLED:    http.StatusTooManyRequests,
}

// retryAfterSeconds is what a sender is asked to wait when storage is unavailable.
const retryAfterSeconds = "5"

// errorBody is every JSON error reply.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// handleError turns any error a handler returns into one reply: the status from
// the domain code, plain words for people, the detail in the log only. Dashboard
// pages get an HTML page; webhooks, the API and machines get JSON.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg := http.StatusInternalServerError, ledger.EINTERNAL, "Internal error."
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		code = http.StatusText(he.Code)
		msg = http.StatusText(he.Code) + "."
		if m, ok := he.Message.(string); ok && m != "" {
			msg = m
		}
	} else {
		code = ledger.ErrorCode(err)
		msg = ledger.ErrorMessage(err)
		if st, ok := statusOf[code]; ok {
			status = st
		}
	}
	if status >= 500 {
		s.logger.ErrorContext(c.Request().Context(), "request failed",
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "path", c.Path(), "status", status, "err", err)
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if wantsHTML(c) {
		s.renderError(c, status, msg)
		return
	}
	_ = c.JSON(status, errorBody{Error: msg, Code: code})
}

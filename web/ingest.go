package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook"
)

// storeTimeout bounds how long a delivery waits for storage before a 503.
const storeTimeout = 5 * time.Second

// ingestReply is the body of every 200 from POST /hooks/{source}.
type ingestReply struct {
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate"`
}

// ingest verifies a webhook on its raw bytes, stores it and only then acknowledges it.
func (s *Server) ingest(c echo.Context) error {
	src, ok := s.cfg.Source(c.Param("source"))
	if !ok {
		return oncehook.Errorf(oncehook.ENOTFOUND, "No source is named %q.", c.Param("source"))
	}
	raw, err := readLimited(c, src.MaxBody)
	if err != nil {
		return err
	}
	d, err := oncehook.Verify(oncehook.VerifyParams{
		Provider: src.Provider, Secrets: src.Secrets, Tolerance: src.Tolerance,
		Now: s.now(), Header: c.Request().Header, Body: raw,
	})
	if err != nil {
		return err
	}
	// A slow database must not hold the sender past its own timeout: answer 503
	// in bounded time so it retries.
	ctx, cancel := context.WithTimeout(c.Request().Context(), storeTimeout)
	defer cancel()
	rc, err := s.inbox.Accept(ctx, src, d, raw)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ingestReply{EventID: strconv.FormatInt(rc.EventID, 10), Duplicate: rc.Duplicate})
}

// readLimited reads the request body, refusing it with ETOOLARGE as soon as it passes
// limit: a declared Content-Length over the limit is refused before reading anything.
func readLimited(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	tooLarge := oncehook.Errorf(oncehook.ETOOLARGE, "The body is larger than this source's limit of %d bytes.", limit)
	if req.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, &oncehook.Error{Code: oncehook.EINVALID, Message: "The body could not be read.", Err: err}
	}
	return body, nil
}

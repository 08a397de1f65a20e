package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
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
	start := time.Now()
	source := c.Param("source")
	span := startDeliverySpan(c, source)
	rc, answer, err := s.accept(c, source)
	endDeliverySpan(span, rc, err)
	if answer != nil {
		// An endpoint handshake, verified: answered as its provider expects, stored nowhere.
		s.metrics.Delivery(source, "handshake", "", time.Since(start))
		return c.Blob(http.StatusOK, answer.ContentType, answer.Body)
	}
	if err != nil {
		if _, known := s.cfg.Source(source); !known {
			source = "unknown" // a label per made-up path would grow without bound
		}
		s.metrics.Delivery(source, "rejected", rejectReason(err), time.Since(start))
		return err
	}
	outcome := "new"
	switch {
	case rc.Conflict:
		outcome = "conflict"
	case rc.Duplicate:
		outcome = "duplicate"
	}
	s.metrics.Delivery(source, outcome, "", time.Since(start))
	c.Set(logAttrsKey, []any{"source", source, "event_id", rc.EventID, "outcome", outcome})
	return c.JSON(http.StatusOK, ingestReply{EventID: strconv.FormatInt(rc.EventID, 10), Duplicate: rc.Duplicate})
}

// accept verifies and stores one delivery; a verified endpoint handshake comes back
// as its answer instead, with nothing stored.
func (s *Server) accept(c echo.Context, source string) (ledger.Receipt, *ledger.Answer, error) {
	src, ok := s.cfg.Source(source)
	if !ok {
		return ledger.Receipt{}, nil, ledger.Errorf(ledger.ENOTFOUND, "No source is named %q.", source)
	}
	raw, err := readLimited(c, src.MaxBody)
	if err != nil {
		return ledger.Receipt{}, nil, err
	}
	req := c.Request()
	d, err := provider.Verify(provider.VerifyParams{
		Provider: src.Provider, Secrets: src.Secrets, Tolerance: src.Tolerance,
		Now: s.now(), Header: req.Header, Body: raw,
		Spec: src.Verify, Method: req.Method, Query: req.URL.RawQuery,
	})
	if err != nil || d.Answer != nil {
		return ledger.Receipt{}, d.Answer, err
	}
	// A slow database must not hold the sender past its own timeout: answer 503
	// in bounded time so it retries.
	ctx, cancel := context.WithTimeout(c.Request().Context(), storeTimeout)
	defer cancel()
	noteDeliveryID(ctx, d.ID)
	rc, err := s.inbox.Accept(ctx, src, d, raw)
	return rc, nil, err
}

// rejectReason names why a delivery was refused, for the metrics.
func rejectReason(err error) string {
	switch ledger.ErrorCode(err) {
	case ledger.EUNAUTHORIZED:
		return "signature"
	case ledger.ENOTFOUND:
		return "unknown_source"
	case ledger.ETOOLARGE:
		return "too_large"
	case ledger.ETIMEOUT:
		return "slow_body"
	case ledger.EINVALID:
		return "invalid"
	case ledger.EUNAVAILABLE:
		return "unavailable"
	}
	return "error"
}

// readLimited reads the request body, refusing it with ETOOLARGE as soon as it passes
// limit: a declared Content-Length over the limit is refused before reading anything.
func readLimited(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	tooLarge := ledger.Errorf(ledger.ETOOLARGE, "The body is larger than this source's limit of %d bytes.", limit)
	if req.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := readAll(http.MaxBytesReader(c.Response(), io.NopCloser(newHookBody(c)), limit), req.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		if ledger.ErrorCode(err) == ledger.ETIMEOUT {
			return nil, err
		}
		return nil, &ledger.Error{Code: ledger.EINVALID, Message: "The body could not be read.", Err: err}
	}
	return body, nil
}

// presize is the most readAll sets aside for a body before it arrives.
const presize = 64 << 10

// readAll is io.ReadAll with room for a declared length from the start, up to
// presize: a webhook declares its length, and io.ReadAll's growing from 512 bytes
// copied a 2 KB body four times. Larger bodies grow as they arrive, so a client that
// declares a large body and sends nothing holds no more than presize.
func readAll(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 {
		return io.ReadAll(r)
	}
	// One byte more than declared, so that the end is seen without growing.
	b := make([]byte, 0, min(declared, presize)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // longer than presize (or than declared, which net/http refuses)
			b = append(b, 0)[:len(b)]
		}
	}
}

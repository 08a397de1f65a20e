package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/sender"
)

// The load generator speaks HTTP/1.1 itself, the way wrk does: net/http's client
// spends far more CPU a request (transport goroutines, header maps, body wrappers),
// CPU taken from the server and Postgres being measured, while the baseline's
// client, pgbench, is lean C (docs/performance.md has the figures). So each sender
// owns one keep-alive connection, writes a request with one Write and reads no more
// of the reply than its status and length: the bench measures the server, not the
// client.

const requestTimeout = 30 * time.Second // as net/http's client had, when ctx has no sooner deadline

// rawConn is one sender's keep-alive connection to the server. It dials on first
// use and again after any error or a "Connection: close" reply. It is not safe for
// concurrent use: each sender goroutine has its own.
type rawConn struct {
	addr, path string // from the poster; addr is also the Host header
	nc         net.Conn
	br         *bufio.Reader
	buf        []byte // the request being written, reused
}

func (c *rawConn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// post sends one delivery signed as Stripe would, with the current time, and
// returns the reply's status. ctx bounds the request: its deadline becomes the
// connection's, and cancelling it closes the connection under a pending request.
func (c *rawConn) post(ctx context.Context, body []byte) (int, error) {
	// Signed on every post: the signature's timestamp must be current.
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := c.dial(ctx); err != nil {
		return 0, err
	}
	nc := c.nc
	if err := nc.SetDeadline(requestDeadline(ctx)); err != nil {
		c.close()
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })

	c.buf = c.appendRequest(c.buf[:0], hdr, body)
	status, keep := 0, false
	if _, err = nc.Write(c.buf); err == nil {
		status, keep, err = readReply(c.br)
	}

	if !stop() { // ctx was cancelled: the connection is closed or closing
		keep = false
	}
	if err != nil || !keep {
		c.close()
	}
	if err != nil {
		return 0, requestError(ctx, err)
	}
	return status, nil
}

// dial connects when there is no connection, reusing the reader's buffer.
func (c *rawConn) dial(ctx context.Context) error {
	if c.nc != nil {
		return nil
	}
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	var err error
	if c.nc, err = d.DialContext(ctx, "tcp", c.addr); err != nil {
		return err
	}
	if c.br == nil {
		c.br = bufio.NewReaderSize(c.nc, 4096)
	} else {
		c.br.Reset(c.nc)
	}
	return nil
}

// requestDeadline is ctx's deadline, or requestTimeout from now if that is sooner.
func requestDeadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(requestTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return deadline
}

// appendRequest appends the POST of body with the signature headers hdr to b.
func (c *rawConn) appendRequest(b []byte, hdr http.Header, body []byte) []byte {
	b = append(b, "POST "...)
	b = append(b, c.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.addr...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	for k, vs := range hdr { // Stripe-Signature, and the Content-Type already written
		if k == "Content-Type" {
			continue
		}
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	return append(append(b, "\r\n"...), body...)
}

// requestError is err, or the end of ctx as net/http would report it, also when
// the connection's deadline (ctx's) fired a moment before ctx's own timer.
func requestError(ctx context.Context, err error) error {
	if dl, ok := ctx.Deadline(); ctx.Err() != nil || ok && !time.Now().Before(dl) {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// readReply reads one reply's status line and headers and discards its body, and
// says whether the connection may be used again. oncehook (Go net/http and Echo)
// answers a webhook with a small JSON body and a Content-Length; a reply without
// one (chunked, or ended by closing) is an error here.
func readReply(br *bufio.Reader) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return 0, false, fmt.Errorf("malformed status line %q", line)
		}
		status = status*10 + int(d-'0')
	}
	keep, length := true, -1
	for {
		if line, err = br.ReadSlice('\n'); err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("malformed header line %q", line)
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil || length < 0 {
				return 0, false, fmt.Errorf("malformed Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			return 0, false, fmt.Errorf("unsupported Transfer-Encoding %q", v)
		case bytes.EqualFold(k, []byte("Connection")):
			keep = !bytes.EqualFold(v, []byte("close"))
		}
	}
	switch {
	case status == 204 || status == 304: // no body by definition
		length = 0
	case status < 200:
		return 0, false, fmt.Errorf("unexpected interim reply %d", status)
	case length < 0:
		return 0, false, errors.New("reply without Content-Length")
	}
	if _, err := br.Discard(length); err != nil {
		return 0, false, err
	}
	return status, keep, nil
}

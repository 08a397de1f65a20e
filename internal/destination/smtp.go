package destination

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// SMTP sends one email per action (docs/configuration.md, destinations of type
// smtp). SMTP has no lookup and no idempotency key, so the derived Message-ID is the
// only evidence, and an unsure send goes to a person.
type SMTP struct {
	d       settings.Destination
	secrets *settings.Secrets // every secret the process holds: a server's reply may quote one
	// tlsOffered remembers that the server offers STARTTLS, so that later sends
	// upgrade on their first connection instead of probing again.
	tlsOffered atomic.Bool
}

// NewSMTP returns the client for the smtp destination d, used as the config
// loader made it, defaults applied.
func NewSMTP(d settings.Destination) *SMTP {
	secrets := settings.NewSecrets(nil)
	secrets.Add(d.Password)
	return &SMTP{d: d, secrets: secrets}
}

// Capabilities reports neither a lookup nor a key memory: only a person can tell
// whether an unsure send arrived.
func (s *SMTP) Capabilities() ledger.Capabilities { return ledger.Capabilities{} }

// Lookup proves nothing: SMTP cannot be asked what it delivered. Capabilities says
// so, and the reconciler never calls it.
func (s *SMTP) Lookup(context.Context, string) ledger.LookupResult {
	return ledger.LookupResult{Detail: "smtp offers no lookup"}
}

// Perform sends the message once. A refusal before the end of the data, or a failure
// to send it whole, means nothing was accepted (throttled, rejected or unauthorized by
// the reply code); silence after the whole message went out means it may have been.
func (s *SMTP) Perform(ctx context.Context, c ledger.Call) ledger.Outcome {
	out := s.perform(ctx, c)
	out.Detail = s.secrets.Scrub(out.Detail)
	return out
}

func (s *SMTP) perform(ctx context.Context, c ledger.Call) ledger.Outcome {
	m, err := composeMail(c, s.d.From, time.Now())
	if err != nil {
		return ledger.Outcome{Observed: ledger.ObsRejected, Detail: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.d.Timeout)
	defer cancel()
	conn, err := s.open(ctx)
	if err != nil {
		return s.failure(ctx, err, false)
	}
	defer conn.close()
	reply, sent, err := conn.send(m)
	if err != nil {
		return s.failure(ctx, err, sent)
	}
	_ = conn.Quit() // the message is accepted; a failed goodbye changes nothing
	return ledger.Outcome{
		Observed:    ledger.ObsSuccess,
		HTTPStatus:  250,
		ExternalRef: m.id,
		Result:      json.RawMessage(fmt.Sprintf(`{"message_id":%q}`, m.id)),
		Detail:      "SMTP 250: " + replyExcerpt([]byte(reply)),
	}
}

// Check connects, greets, authenticates when credentials are configured, and quits.
func (s *SMTP) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.d.Timeout)
	defer cancel()
	conn, err := s.open(ctx)
	if err != nil {
		var se *smtp.SMTPError
		if errors.Is(err, errSMTPAuth) && errors.As(err, &se) && se.Code >= 500 {
			return fmt.Errorf("the destination refused the credentials (SMTP %d)", se.Code)
		}
		return fmt.Errorf("the destination could not be reached: %s", s.secrets.Scrub(err.Error()))
	}
	defer conn.close()
	if err := conn.Quit(); err != nil {
		return fmt.Errorf("the destination could not be reached: %s", s.secrets.Scrub(err.Error()))
	}
	return nil
}

// errSMTPAuth marks a failure of the AUTH exchange, where any permanent refusal is
// about the credentials.
var errSMTPAuth = errors.New("authenticate")

// failure classifies a failed exchange. sent says whether the whole message,
// terminator included, went out before the failure.
func (s *SMTP) failure(ctx context.Context, err error, sent bool) ledger.Outcome {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		o := ledger.Outcome{HTTPStatus: se.Code, Detail: fmt.Sprintf("SMTP %d: %s", se.Code, replyExcerpt([]byte(se.Message)))}
		switch {
		case se.Code == 530 || se.Code == 535 || errors.Is(err, errSMTPAuth) && se.Code >= 500:
			o.Observed = ledger.ObsUnauthorized
			return o
		case se.Code >= 400 && se.Code < 500:
			o.Observed = ledger.ObsThrottled
			return o
		case se.Code >= 500 && se.Code < 600:
			o.Observed = ledger.ObsRejected
			return o
		}
		// An unexpected positive code falls through: where it came decides.
	}
	cause := err.Error()
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		cause = fmt.Sprintf("timed out after %s", s.d.Timeout)
	}
	if sent {
		return ledger.Outcome{Observed: ledger.ObsUnsure, Detail: fmt.Sprintf(
			"the message was sent but no reply came (%s): it may have been accepted; SMTP has no lookup, so a person decides", cause)}
	}
	return ledger.Outcome{Observed: ledger.ObsThrottled, Detail: "not sent: " + cause}
}

// smtpConn is a client whose connection records failed writes and is closed when
// the call's context ends: go-smtp resets its deadlines for every command, so only
// closing the connection bounds the whole exchange.
type smtpConn struct {
	*smtp.Client
	tc   *trackedConn
	stop func() bool
}

type trackedConn struct {
	net.Conn
	writeFailed atomic.Bool
}

func (t *trackedConn) Write(b []byte) (int, error) {
	n, err := t.Conn.Write(b)
	if err != nil {
		t.writeFailed.Store(true)
	}
	return n, err
}

func (c *smtpConn) close() {
	c.stop()
	_ = c.Client.Close()
}

// open connects, upgrades to TLS when the server offers it, and authenticates. go-smtp
// upgrades only a fresh client, so the first time STARTTLS is seen the probing
// connection is dropped and a new one upgraded.
func (s *SMTP) open(ctx context.Context) (*smtpConn, error) {
	useTLS := s.tlsOffered.Load()
	c, err := s.connect(ctx, useTLS)
	if err != nil {
		if useTLS {
			s.tlsOffered.Store(false) // the server may have stopped offering it
		}
		return nil, err
	}
	if !useTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			s.tlsOffered.Store(true)
			_ = c.Quit()
			c.close()
			if c, err = s.connect(ctx, true); err != nil {
				return nil, err
			}
		}
	}
	if s.d.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.d.Username, s.d.Password)); err != nil {
			c.close()
			return nil, fmt.Errorf("%w: %w", errSMTPAuth, err)
		}
	}
	return c, nil
}

func (s *SMTP) connect(ctx context.Context, startTLS bool) (*smtpConn, error) {
	var dialer net.Dialer
	raw, err := dialer.DialContext(ctx, "tcp", s.d.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", s.d.Addr, err)
	}
	tc := &trackedConn{Conn: raw}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	var c *smtp.Client
	if startTLS {
		host, _, _ := net.SplitHostPort(s.d.Addr)
		c, err = smtp.NewClientStartTLS(tc, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
	} else {
		c = smtp.NewClient(tc)
		err = c.Hello("localhost")
	}
	if err != nil {
		stop()
		_ = raw.Close()
		return nil, fmt.Errorf("greet %s: %w", s.d.Addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.CommandTimeout, c.SubmissionTimeout = time.Until(dl), time.Until(dl)
	}
	return &smtpConn{Client: c, tc: tc, stop: stop}, nil
}

// send runs one mail transaction and returns the server's acceptance text. sent
// reports whether the whole message, terminator included, was written.
func (c *smtpConn) send(m *mailMessage) (reply string, sent bool, err error) {
	if err := c.Mail(m.from, nil); err != nil {
		return "", false, fmt.Errorf("mail from: %w", err)
	}
	for _, to := range m.to {
		if err := c.Rcpt(to, nil); err != nil {
			return "", false, fmt.Errorf("rcpt to: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return "", false, fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(m.data); err != nil {
		return "", false, fmt.Errorf("write message: %w", err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		// Writes are buffered until the terminator; if none failed, it went out.
		return "", !c.tc.writeFailed.Load(), fmt.Errorf("end of data: %w", err)
	}
	return resp.StatusText, true, nil
}

// mailMessageID is the Message-ID derived from the operation key. A key that cannot
// stand in a msg-id as it is (RFC 5322 dot-atom) is hashed, so the header stays valid
// and the same key always gives the same id.
func mailMessageID(key string) (id, token string) {
	token = key
	if !isDotAtom(key) {
		sum := sha256.Sum256([]byte(key))
		token = hex.EncodeToString(sum[:])
	}
	return "<" + token + "@oncehook>", token
}

func isDotAtom(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-/=?^_`{|}~.", r)) {
			return false
		}
	}
	return true
}

// mailMessage is one composed message and its envelope.
type mailMessage struct {
	id   string // the Message-ID, the evidence
	from string
	to   []string
	data []byte
}

// composeMail builds the message from the params to (an address, a list in one
// string, or an array of addresses; required), subject, text and optional html.
func composeMail(c ledger.Call, from string, now time.Time) (*mailMessage, error) {
	if c.OperationKey == "" {
		return nil, fmt.Errorf("the call has no operation key")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(c.Params, &p); err != nil || p == nil {
		return nil, fmt.Errorf("params are not a JSON object")
	}
	to, err := mailRecipients(p["to"])
	if err != nil {
		return nil, err
	}
	var subject, text, html string
	for name, dst := range map[string]*string{"subject": &subject, "text": &text, "html": &html} {
		if raw, ok := p[name]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("param %s must be a string", name)
			}
		}
	}
	sender, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("the destination's from %q is not an email address", from)
	}
	id, token := mailMessageID(c.OperationKey)
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", sender.String())
	names := make([]string, len(to))
	for i, a := range to {
		names[i] = a.String()
	}
	header("To", strings.Join(names, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", id)
	header("X-Oncehook-Operation-Key", token)
	header("MIME-Version", "1.0")
	if err := writeMailBody(&b, text, html); err != nil {
		return nil, fmt.Errorf("compose message: %w", err)
	}
	m := &mailMessage{id: id, from: sender.Address, data: b.Bytes()}
	for _, a := range to {
		m.to = append(m.to, a.Address)
	}
	return m, nil
}

func mailRecipients(raw json.RawMessage) ([]*mail.Address, error) {
	var one string
	var many []string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, fmt.Errorf("param to is required")
	case json.Unmarshal(raw, &one) == nil:
		list, err := mail.ParseAddressList(one)
		if err != nil {
			return nil, fmt.Errorf("param to %q is not a list of email addresses", one)
		}
		return list, nil
	case json.Unmarshal(raw, &many) == nil && len(many) > 0:
		list := make([]*mail.Address, len(many))
		for i, s := range many {
			a, err := mail.ParseAddress(s)
			if err != nil {
				return nil, fmt.Errorf("param to[%d] %q is not an email address", i, s)
			}
			list[i] = a
		}
		return list, nil
	}
	return nil, fmt.Errorf("param to must be an email address or a list of them")
}

// writeMailBody writes the content headers and the body: plain text, or text and
// html as alternatives. Quoted-printable keeps lines short and 8-bit text intact.
func writeMailBody(b *bytes.Buffer, text, html string) error {
	if html == "" {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
		return writeQuotedPrintable(b, text)
	}
	var parts bytes.Buffer
	mw := multipart.NewWriter(&parts)
	for _, p := range []struct{ kind, body string }{{"text/plain", text}, {"text/html", html}} {
		w, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.kind + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return fmt.Errorf("create %s part: %w", p.kind, err)
		}
		if err := writeQuotedPrintable(w, p.body); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return fmt.Errorf("close multipart: %w", err)
	}
	fmt.Fprintf(b, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", mw.Boundary())
	b.Write(parts.Bytes())
	return nil
}

func writeQuotedPrintable(w io.Writer, s string) error {
	qp := quotedprintable.NewWriter(w)
	if _, err := io.WriteString(qp, s); err != nil {
		return fmt.Errorf("encode body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return fmt.Errorf("encode body: %w", err)
	}
	return nil
}

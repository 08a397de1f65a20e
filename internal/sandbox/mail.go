package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"slices"
	"strings"
	"sync"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one message the sink accepted.
type Message struct {
	From      string   // envelope sender
	To        []string // envelope recipients
	Subject   string   // decoded
	MessageID string
	Body      string // decoded when the message is a single quoted-printable part; no final CRLF
	Data      []byte // the message as received
}

// Mail is an SMTP sink: it accepts any sender and recipient and keeps what it
// receives in memory. It is safe for concurrent use.
type Mail struct {
	srv    *smtp.Server
	ln     net.Listener
	served chan struct{}
	done   chan struct{}
	close  sync.Once

	mu       sync.Mutex
	messages []Message
	failCode int
	failMsg  string
	hang     chan struct{}
	user     string
	pass     string
}

// StartMail listens on addr ("127.0.0.1:0" picks a port) and serves until Close.
// AUTH PLAIN is offered without TLS, since the sink only ever runs locally.
func StartMail(addr string) (*Mail, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for mail: %w", err)
	}
	m := &Mail{ln: ln, served: make(chan struct{}), done: make(chan struct{})}
	m.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &mailSession{m: m}, nil
	}))
	m.srv.Domain = "sandbox.oncehook"
	m.srv.AllowInsecureAuth = true
	m.srv.MaxMessageBytes = 10 << 20
	m.srv.ErrorLog = log.New(io.Discard, "", 0) // clients that time out on purpose are no news
	go func() {
		defer close(m.served)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// Addr is the host:port the sink listens on.
func (m *Mail) Addr() string { return m.ln.Addr().String() }

// Close stops the sink, ends its connections and releases any hung DATA.
func (m *Mail) Close() {
	m.close.Do(func() {
		close(m.done)
		_ = m.srv.Close()
		// Serve registers the listener only once it runs, so a sink closed at once
		// would leave it accepting; closing it here ends Serve either way.
		_ = m.ln.Close()
		<-m.served
	})
}

// Messages returns a copy of the messages accepted so far, in order.
func (m *Mail) Messages() []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.messages)
}

// FailNext answers the next DATA with code and msg instead of accepting it.
func (m *Mail) FailNext(code int, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failCode, m.failMsg = code, msg
}

// HangNext reads the whole of the next DATA but does not answer until ch is closed,
// so the client times out after sending. The message is accepted when ch closes.
func (m *Mail) HangNext(ch chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hang = ch
}

// RequireAuth makes the sink accept only these credentials (AUTH PLAIN), refusing
// others with 535 and unauthenticated senders with 530. Without it any login works.
func (m *Mail) RequireAuth(username, password string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.user, m.pass = username, password
}

// takeDataFault returns the fault scheduled for this DATA, clearing it.
func (m *Mail) takeDataFault() (code int, msg string, hang chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	code, msg, hang = m.failCode, m.failMsg, m.hang
	m.failCode, m.failMsg, m.hang = 0, "", nil
	return code, msg, hang
}

type mailSession struct {
	m      *Mail
	authed bool
	from   string
	to     []string
}

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *mailSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		s.m.mu.Lock()
		user, pass := s.m.user, s.m.pass
		s.m.mu.Unlock()
		if user != "" && (username != user || password != pass) {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	s.m.mu.Lock()
	required := s.m.user != ""
	s.m.mu.Unlock()
	if required && !s.authed {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	s.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read data: %w", err)
	}
	code, msg, hang := s.m.takeDataFault()
	if code != 0 {
		return &smtp.SMTPError{Code: code, Message: msg}
	}
	if hang != nil {
		select {
		case <-hang:
		case <-s.m.done:
			return errors.New("sink closed")
		}
	}
	parsed := parseMessage(data)
	parsed.From, parsed.To = s.from, slices.Clone(s.to)
	s.m.mu.Lock()
	s.m.messages = append(s.m.messages, parsed)
	s.m.mu.Unlock()
	return nil
}

func (s *mailSession) Reset() { s.from, s.to = "", nil }

func (s *mailSession) Logout() error { return nil }

// parseMessage reads the headers tests look at. A message that does not parse is
// still kept, with Data only: the sink records, it does not judge.
func parseMessage(data []byte) Message {
	msg := Message{Data: data}
	pm, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return msg
	}
	var dec mime.WordDecoder
	if msg.Subject, err = dec.DecodeHeader(pm.Header.Get("Subject")); err != nil {
		msg.Subject = pm.Header.Get("Subject")
	}
	msg.MessageID = pm.Header.Get("Message-ID")
	var body io.Reader = pm.Body
	if strings.EqualFold(pm.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	// A bad encoding leaves what was decoded; Data has the rest. The final CRLF is
	// the one SMTP requires, not part of the text.
	b, _ := io.ReadAll(body)
	msg.Body = strings.TrimSuffix(string(b), "\r\n")
	return msg
}

package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
)

// minToken is the shortest token accepted (a generated one is 43).
const minToken = 16

// maxSessions bounds the sessions kept; the oldest goes first.
const maxSessions = 1024

// NewToken is a random token: 32 bytes from crypto/rand, hex.
func NewToken() string {
	return hex.EncodeToString(randomBytes(32))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return b
}

// ReadToken reads the token in file (surrounding space trimmed).
func ReadToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the token file %s: %w; pass a file holding one line, the token", file, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < minToken || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("the token file %s must hold one token of %d or more characters and no spaces; `openssl rand -hex 32 > %s` makes one", file, minToken, file)
	}
	return tok, nil
}

// session is a browser let in by the token: its id is the cookie's value
// (never the token), csrf the token its forms carry.
type session struct {
	id, csrf string
}

// sessions are the browsers let in, at most max (the oldest go first).
type sessions struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*session
	order []string
}

func newSessions(max int) *sessions { return &sessions{max: max, byID: map[string]*session{}} }

// add makes a new session.
func (ss *sessions) add() *session {
	s := &session{id: hex.EncodeToString(randomBytes(32)), csrf: hex.EncodeToString(randomBytes(32))}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.order) >= ss.max {
		delete(ss.byID, ss.order[0])
		ss.order = ss.order[1:]
	}
	ss.byID[s.id] = s
	ss.order = append(ss.order, s.id)
	return s
}

func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.byID[id]
}

// who is how a request was let in.
type who struct {
	session *session // by the session cookie; nil for Bearer
}

type whoKey struct{}

// whoOf is how r was let in (guard put it there).
func whoOf(r *http.Request) who {
	w, _ := r.Context().Value(whoKey{}).(who)
	return w
}

// csrfOf is the CSRF token r's forms carry ("" for a Bearer client).
func csrfOf(r *http.Request) string {
	if s := whoOf(r).session; s != nil {
		return s.csrf
	}
	return ""
}

// equal compares secrets in constant time.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// guard lets a request in by its Host, then its token or session; a
// state-changing request with a cookie must also come from the same
// origin and carry its session's CSRF token.
func (s *Server) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostOK(r.Host) {
			s.fail(w, r, http.StatusMisdirectedRequest, fmt.Sprintf("ralph web does not answer for host %q; open it by the address it printed", r.Host))
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; style-src-attr 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		if tok := r.URL.Query().Get("token"); tok != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.signIn(w, r, tok)
			return
		}
		var in who
		if h := r.Header.Get("Authorization"); h != "" {
			bearer, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || !equal(strings.TrimSpace(bearer), s.o.Token) {
				s.fail(w, r, http.StatusUnauthorized, "the Authorization header does not carry ralph web's token; send Authorization: Bearer TOKEN with the token it printed")
				return
			}
		} else if c, err := r.Cookie(s.cookie); err == nil && s.sessions.get(c.Value) != nil {
			in.session = s.sessions.get(c.Value)
		} else {
			s.fail(w, r, http.StatusUnauthorized, "this needs ralph web's token; open the address it printed (with ?token=) or send Authorization: Bearer TOKEN")
			return
		}
		if in.session != nil && !safeMethod(r.Method) {
			if err := cop.Check(r); err != nil {
				s.fail(w, r, http.StatusForbidden, "this form was sent from another site; send it from ralph web's own page")
				return
			}
			if err := r.ParseForm(); err != nil || !equal(r.PostFormValue("csrf"), in.session.csrf) {
				s.fail(w, r, http.StatusForbidden, "this form's CSRF token is missing or stale; reload the page and send the form again")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(contextWith(r, in)))
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// signIn answers a visit with ?token=: a right token gets a session
// cookie and a redirect to the same address without the token.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request, tok string) {
	if !equal(tok, s.o.Token) {
		s.fail(w, r, http.StatusUnauthorized, "the token in this address is not ralph web's; open the address it printed")
		return
	}
	ss := s.sessions.add()
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: ss.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil})
	q := r.URL.Query()
	q.Del("token")
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// hostOK says whether a request for host is one for this server: a
// loopback name or the listen host (any, when listening on every
// address), against DNS rebinding.
func (s *Server) hostOK(host string) bool {
	if s.hosts == nil {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return slices.Contains(s.hosts, host)
}

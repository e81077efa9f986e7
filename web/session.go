package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// session is what the signed session cookie carries. It names how the browser logged in, so that
// revoking the key (or changing the viewer token) ends the session at once.
type session struct {
	// Project is the project id the session may see.
	Project int64 `json:"p"`
	// Key is the id of the API key the session logged in with; 0 for the viewer token.
	Key int64 `json:"k,omitempty"`
	// Viewer is the fingerprint of the viewer token the session logged in with.
	Viewer string `json:"v,omitempty"`
	// Expires is when the session ends, in Unix seconds.
	Expires int64 `json:"e"`
	// CSRF is the token the session's forms (logout) must send back.
	CSRF string `json:"c"`
}

var errBadSession = errors.New("invalid session")

// signer signs and checks cookie values with HMAC-SHA256 under the secret every replica reads from
// the settings table.
type signer struct{ secret []byte }

func (s signer) mac(purpose, payload string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// encode returns the cookie value of sess: base64(JSON) "." base64(HMAC).
func (s signer) encode(sess session) string {
	b, _ := json.Marshal(sess)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + s.mac("session", payload)
}

// decode checks a cookie value's signature and expiry and returns its session.
func (s signer) decode(value string, now time.Time) (session, error) {
	payload, sig, ok := strings.Cut(value, ".")
	if !ok || len(value) > 1024 || !hmac.Equal([]byte(sig), []byte(s.mac("session", payload))) {
		return session{}, errBadSession
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return session{}, errBadSession
	}
	var sess session
	if err := json.Unmarshal(b, &sess); err != nil || sess.Project <= 0 || sess.CSRF == "" {
		return session{}, errBadSession
	}
	if now.Unix() >= sess.Expires {
		return session{}, errBadSession
	}
	return sess, nil
}

// viewerFingerprint identifies a viewer token without revealing it.
func (s signer) viewerFingerprint(token string) string { return s.mac("viewer", token)[:22] }

// randomToken returns 32 random bytes in hex, for CSRF tokens and the session secret.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// errReader fails a read, as a client dropping its body half way does.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestHandler(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		body       io.Reader
		wantStatus int
		wantBody   string
	}{
		{"a record", http.MethodPost, "/v1/attempts", strings.NewReader(`{"attempt_id":"a1"}`), http.StatusOK, string(answer)},
		{"an empty body", http.MethodPost, "/v1/attempts", http.NoBody, http.StatusOK, string(answer)},
		{"a body that fails", http.MethodPost, "/v1/attempts", errReader{}, http.StatusBadRequest, "unexpected EOF\n"},
		{"another method", http.MethodGet, "/v1/attempts", nil, http.StatusMethodNotAllowed, ""},
		{"another path", http.MethodPost, "/v1/summary", strings.NewReader(`{}`), http.StatusNotFound, ""},
	}
	h := handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, tt.body))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantStatus != http.StatusOK && tt.wantBody == "" {
				return
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("body %q, want %q", got, tt.wantBody)
			}
			if tt.wantStatus == http.StatusOK {
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
			}
		})
	}
}

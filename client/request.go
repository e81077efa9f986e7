package client

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/schema"
)

// requestFields are the only fields read from a request body.
type requestFields struct {
	Model  string
	Stream bool
}

// maxPresize bounds the buffer allocated ahead from a request's Content-Length.
const maxPresize = 64 << 20

// readRequest finds the model and stream fields of a JSON request body. The body is read into
// memory, the caller's req is left as it was, and a shallow copy with the same bytes as its body is
// returned to be sent on, with the bytes (nil when the body was not read).
func readRequest(req *http.Request) (*http.Request, requestFields, []byte, error) {
	if req.Body == nil || req.Body == http.NoBody || !isJSON(req.Header.Get("Content-Type"), true) {
		return req, requestFields{}, nil, nil
	}
	var buf bytes.Buffer
	if req.ContentLength > 0 && req.ContentLength < maxPresize {
		buf.Grow(int(req.ContentLength) + bytes.MinRead) // ReadFrom wants MinRead free at the end
	}
	_, err := buf.ReadFrom(req.Body)
	if cerr := req.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, requestFields{}, nil, err
	}
	b := buf.Bytes()
	f := scanRequest(b)
	out := new(http.Request)
	*out = *req
	out.Body = io.NopCloser(bytes.NewReader(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	out.ContentLength = int64(len(b))
	return out, f, b, nil
}

// isJSON reports whether a Content-Type is JSON (an empty one counts when orEmpty).
func isJSON(ct string, orEmpty bool) bool {
	if ct == "" {
		return orEmpty
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// scanRequest reads the top-level "model" (a string) and "stream" (a boolean) members of a JSON
// object. It decodes nothing else: the prompt is skipped, strings with a byte search, so the cost
// stays far below a full decode, and the request is never delayed by more than a pass over it. A
// member repeated counts by its last value, as encoding/json would take it; keys match exactly.
func scanRequest(b []byte) requestFields {
	var f requestFields
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return f
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return f
		}
		end := skipString(b, i)
		key := b[i:end]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return f
		}
		i = skipSpace(b, i+1)
		end = skipValue(b, i)
		switch val := b[i:end]; jsonString(key) {
		case "model":
			f.Model = ""
			if len(val) > 0 && val[0] == '"' {
				f.Model = clean(jsonString(val), schema.MaxNameLen)
			}
		case "stream":
			f.Stream = string(bytes.TrimRight(val, " \t\r\n")) == "true"
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return f
		}
		i++
	}
}

// jsonString decodes a quoted JSON string (invalid UTF-8 turning into U+FFFD, as encoding/json does),
// taking plain ones as they are; "" if it is not a string.
func jsonString(q []byte) string {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return ""
	}
	if bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return string(q[1 : len(q)-1])
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return ""
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a quote), or len(b).
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0 // backslashes before the quote: an odd count escapes it
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index after the value starting at b[i]: a string, an object or array with
// all it holds, or a literal up to the next comma or closing bracket.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

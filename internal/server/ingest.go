package server

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/schema"
)

// Admit is middleware for ingest routes: it bounds the requests in flight across all of them
// (Options.MaxInFlight), and those of one project to half of that, so a burst from one project
// leaves room for the others. The excess is answered 503 with Retry-After at once, so bodies
// waiting for a commit cannot pile up in memory.
func (s *Server) Admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		project := ProjectOf(c).ID
		if !s.admitProject(project) {
			return s.shed(c, "too many ingest requests in flight for this project; retry later")
		}
		defer s.releaseProject(project)
		select {
		case s.inflight <- struct{}{}:
			defer func() { <-s.inflight }()
		default:
			return s.shed(c, "too many ingest requests in flight; retry later")
		}
		return next(c)
	}
}

func (s *Server) shed(c echo.Context, msg string) error {
	s.m.shed.Inc()
	c.Response().Header().Set("Retry-After", "1")
	return echo.NewHTTPError(http.StatusServiceUnavailable, msg)
}

func (s *Server) admitProject(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perProject[id] >= max(1, s.opt.MaxInFlight/2) {
		return false
	}
	s.perProject[id]++
	return true
}

func (s *Server) releaseProject(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perProject[id]--; s.perProject[id] <= 0 {
		delete(s.perProject, id)
	}
}

func (s *Server) ingest(c echo.Context) error {
	req := c.Request()
	ndjson, err := bodyKind(req)
	if err != nil {
		return err
	}
	body, err := s.body(c)
	if err != nil {
		return err
	}
	defer body.Close()
	batch, err := schema.DecodeBody(body, ndjson, s.opt.Now())
	if err != nil {
		if tooLarge(err) {
			return s.bodyTooLarge()
		}
		if errors.Is(err, schema.ErrBody) {
			return echo.NewHTTPError(http.StatusBadRequest, err.Error())
		}
		if timedOut(err) {
			return s.bodyTimedOut()
		}
		return echo.NewHTTPError(http.StatusBadRequest, "read body: "+err.Error())
	}
	for _, r := range batch.Rejected {
		s.m.rejected.WithLabelValues(rejectLabel(r.Field)).Inc()
	}
	resp := schema.IngestResponse{Rejected: batch.Rejected}
	if resp.Rejected == nil {
		resp.Rejected = []schema.Rejection{}
	}
	if len(batch.Records) == 0 {
		resp.Error = "every record was refused"
		return c.JSON(http.StatusBadRequest, resp)
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.opt.SubmitTimeout)
	defer cancel()
	res, err := s.opt.Writer.Submit(ctx, ProjectOf(c).ID, batch.Records)
	// The writer is done with the records unless Submit stopped waiting for their commit.
	if err == nil || ctx.Err() == nil {
		defer batch.Release()
	}
	if err != nil {
		c.Response().Header().Set("Retry-After", RetryAfter(err))
		s.opt.Logger.Warn("ingest not committed", "project", ProjectOf(c).Name, "records", len(batch.Records), "err", err)
		return echo.NewHTTPError(http.StatusServiceUnavailable, "records not committed: "+unavailableReason(err)+"; retry later")
	}
	resp.Accepted, resp.Duplicates = res.Accepted, res.Duplicates
	resp.Unpriced = s.unpriced(batch.Records, batch.Index, res.Unpriced)
	// c.JSON would indent its answer for ?pretty, so only a request without a query skips it.
	if len(resp.Rejected) > 0 || len(resp.Unpriced) > 0 || req.URL.RawQuery != "" {
		return c.JSON(http.StatusOK, resp)
	}
	return c.JSONBlob(http.StatusOK, acceptedJSON(resp.Accepted, resp.Duplicates))
}

// maxUnpricedModels bounds the models an ingest answer names as unpriced: a body of many made-up
// names should not make the answer as large as the body.
const maxUnpricedModels = 20

// unpriced groups the records the writer could not price (positions in recs, whose positions in
// the body are index) by provider and model, with the nearest known ids of each.
func (s *Server) unpriced(recs []schema.Attempt, index, positions []int) []schema.UnpricedModel {
	if len(positions) == 0 {
		return nil
	}
	var out []schema.UnpricedModel
	byName := map[[2]string]int{}
	for _, i := range positions {
		k := [2]string{recs[i].Provider, recs[i].Model}
		n, ok := byName[k]
		if !ok {
			if len(out) == maxUnpricedModels {
				continue
			}
			n = len(out)
			byName[k] = n
			m := schema.UnpricedModel{Provider: k[0], Model: k[1], Nearest: []string{}}
			if s.opt.Suggest != nil {
				if near := s.opt.Suggest(k[0], k[1]); near != nil {
					m.Nearest = near
				}
			}
			out = append(out, m)
		}
		out[n].Records = append(out[n].Records, index[i])
	}
	return out
}

// acceptedJSON is the answer to a request that refused no record, as c.JSON writes it without
// ?pretty (TestAcceptedJSON checks), without encoding/json's reflection on every request.
func acceptedJSON(accepted, duplicates int) []byte {
	b := append(make([]byte, 0, 64), `{"accepted":`...)
	b = strconv.AppendInt(b, int64(accepted), 10)
	b = append(b, `,"duplicates":`...)
	b = strconv.AppendInt(b, int64(duplicates), 10)
	return append(b, ",\"rejected\":[]}\n"...)
}

// RetryAfter is the Retry-After, in seconds, of a 503 for records the writer did not commit: 1
// when its queue is full, 2 otherwise. Every ingest route answers the same.
func RetryAfter(err error) string {
	if errors.Is(err, ingest.ErrOverloaded) {
		return "1"
	}
	return "2"
}

func unavailableReason(err error) string {
	switch {
	case errors.Is(err, ingest.ErrOverloaded):
		return "ingest queue full"
	case errors.Is(err, ingest.ErrClosed):
		return "server shutting down"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "commit did not finish in time"
	default:
		return "database unavailable"
	}
}

// rejectLabel bounds the label values of the rejected counter: metadata keys are folded into one.
func rejectLabel(field string) string {
	if field == "" {
		return "record"
	}
	if strings.HasPrefix(field, "metadata.") {
		return "metadata"
	}
	if _, known := schemaFields[field]; known {
		return field
	}
	return "unknown_field"
}

var schemaFields = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, f := range schema.Fields() {
		m[f] = struct{}{}
	}
	return m
}()

func bodyKind(r *http.Request) (ndjson bool, err error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false, echo.NewHTTPError(http.StatusUnsupportedMediaType, "unreadable Content-Type")
	}
	switch mt {
	case "application/json", "application/x-www-form-urlencoded": // the latter is curl -d's default
		return false, nil
	case "application/x-ndjson", "application/jsonl", "application/ndjson":
		return true, nil
	}
	return false, echo.NewHTTPError(http.StatusUnsupportedMediaType, "Content-Type must be application/json or application/x-ndjson")
}

var errInflatedTooLarge = errors.New("inflated body too large")

// ReadBody reads a whole request body under the ingest limits: Content-Encoding gzip or none, at
// most Options.MaxBodyBytes before and after inflating. Its errors are *echo.HTTPError (400, 413,
// 415), for receivers of other protocols (OTLP) that need the body as one slice.
func (s *Server) ReadBody(c echo.Context) ([]byte, error) {
	body, err := s.body(c)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		if tooLarge(err) {
			return nil, s.bodyTooLarge()
		}
		if timedOut(err) {
			return nil, s.bodyTimedOut()
		}
		return nil, echo.NewHTTPError(http.StatusBadRequest, "read body: "+err.Error())
	}
	return b, nil
}

// tooLarge tells whether reading a body failed on the size limit, before or after gzip.
func tooLarge(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig) || errors.Is(err, errInflatedTooLarge)
}

// timedOut tells whether reading a body failed on its deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) bodyTimedOut() error {
	return echo.NewHTTPError(http.StatusRequestTimeout, fmt.Sprintf("body not received within %s", s.opt.BodyTimeout))
}

func (s *Server) bodyTooLarge() error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", s.opt.MaxBodyBytes))
}

// body returns the request body, limited before and after gzip, and bounds the time left to read
// it (BodyTimeout): a client trickling its body must not hold an in-flight slot for the server's
// whole read timeout.
func (s *Server) body(c echo.Context) (io.ReadCloser, error) {
	r := c.Request()
	if err := http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(s.opt.BodyTimeout)); err != nil {
		s.opt.Logger.Debug("set body read deadline", "err", err)
	}
	if r.ContentLength > s.opt.MaxBodyBytes {
		return nil, s.bodyTooLarge()
	}
	raw := http.MaxBytesReader(c.Response(), r.Body, s.opt.MaxBodyBytes)
	switch strings.ToLower(r.Header.Get("Content-Encoding")) {
	case "", "identity":
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(raw)
		if err != nil {
			return nil, echo.NewHTTPError(http.StatusBadRequest, "Content-Encoding gzip: "+err.Error())
		}
		return &limitedGzip{zr: zr, raw: raw, left: s.opt.MaxBodyBytes}, nil
	}
	return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType, "Content-Encoding must be gzip or absent")
}

// limitedGzip inflates a body and fails once it grows past the limit (a gzip bomb).
type limitedGzip struct {
	zr   *gzip.Reader
	raw  io.Closer
	left int64
}

// Read inflates into p, failing once the inflated body passes the limit.
func (l *limitedGzip) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errInflatedTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.zr.Read(p)
	l.left -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("gzip: %w", err)
	}
	return n, err
}

// Close closes the inflater and the raw body.
func (l *limitedGzip) Close() error {
	l.zr.Close()
	return l.raw.Close()
}

// Package otlp is ledgerd's OTLP/HTTP traces receiver: POST /v1/traces takes the spans a service
// already emits under the OpenTelemetry GenAI semantic conventions (protobuf or JSON, optionally
// gzipped) and records every model-call span as a ledger attempt through the same writer as
// POST /v1/attempts. docs/otlp.md states the mapping from spans to records.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/server"
)

// Options configures the receiver. Zero values take the defaults shown.
type Options struct {
	// Writer commits the records; required.
	Writer *ingest.Writer
	Logger *slog.Logger
	// Registerer receives the receiver's span counter.
	Registerer prometheus.Registerer
	// Now is the clock (time.Now); start times more than a day ahead of it are refused.
	Now func() time.Time
	// TenantAttributes name the tenant of a span, looked up on the span and then on its resource
	// (DefaultTenantAttributes).
	TenantAttributes []string
	// SubmitTimeout bounds how long a request waits for its commit (10 s).
	SubmitTimeout time.Duration
}

// ParseAttributes splits a comma-separated list of attribute names, as the command line gives
// them, dropping empty entries.
func ParseAttributes(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Receiver takes OTLP trace exports and records their GenAI spans as attempts.
type Receiver struct {
	srv   *server.Server
	opt   Options
	spans *prometheus.CounterVec
}

// New returns a receiver writing through opt.Writer; Mount serves it.
func New(opt Options) *Receiver {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.SubmitTimeout <= 0 {
		opt.SubmitTimeout = 10 * time.Second
	}
	return &Receiver{opt: opt,
		spans: promauto.With(opt.Registerer).NewCounterVec(prometheus.CounterOpts{
			Name: "ledgerd_otlp_spans_total",
			Help: "Spans of committed OTLP exports, by outcome: recorded (a GenAI attempt; a redelivered one included), rejected (a GenAI span refused) or ignored (not a GenAI model call).",
		}, []string{"outcome"}),
	}
}

// Mount adds POST /v1/traces to the server's key-protected API group, under the same in-flight
// bound and body limits as POST /v1/attempts.
func (r *Receiver) Mount(s *server.Server) {
	r.srv = s
	s.API.POST("/traces", r.export, s.Admit)
}

// encoding is the body format of one export, which its response repeats.
type encoding int

const (
	encProto encoding = iota
	encJSON
)

func encodingOf(r *http.Request) (encoding, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil {
		switch mt {
		case "application/x-protobuf", "application/protobuf":
			return encProto, nil
		case "application/json":
			return encJSON, nil
		}
	}
	return 0, echo.NewHTTPError(http.StatusUnsupportedMediaType, "Content-Type must be application/x-protobuf or application/json")
}

func (r *Receiver) export(c echo.Context) error {
	enc, err := encodingOf(c.Request())
	if err != nil {
		return err
	}
	body, err := r.srv.ReadBody(c)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			msg, _ := he.Message.(string)
			if he.Code == http.StatusRequestTimeout {
				// OTLP exporters retry 503 but not 408: a body cut off by its deadline is worth a retry.
				c.Response().Header().Set("Retry-After", "1")
				return reply(c, enc, http.StatusServiceUnavailable, &rpcstatus.Status{Code: int32(codes.Unavailable), Message: msg})
			}
			return reply(c, enc, he.Code, &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: msg})
		}
		return err
	}
	var req *coltracepb.ExportTraceServiceRequest
	if enc == encJSON {
		req, err = DecodeJSON(body)
	} else {
		req, err = DecodeProto(body)
	}
	if err != nil {
		return reply(c, enc, http.StatusBadRequest, &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: err.Error()})
	}
	res := Convert(req, r.opt.Now(), r.opt.TenantAttributes)
	project := server.ProjectOf(c)
	if len(res.Records) > 0 {
		ctx, cancel := context.WithTimeout(c.Request().Context(), r.opt.SubmitTimeout)
		defer cancel()
		if _, err := r.opt.Writer.Submit(ctx, project.ID, res.Records); err != nil {
			r.opt.Logger.Warn("OTLP spans not committed", "project", project.Name, "records", len(res.Records), "err", err)
			c.Response().Header().Set("Retry-After", server.RetryAfter(err))
			return reply(c, enc, http.StatusServiceUnavailable, &rpcstatus.Status{Code: int32(codes.Unavailable),
				Message: "spans not committed; retry later"})
		}
	}
	// Counted once answered, so that an export retried after a 503 is not counted twice.
	r.spans.WithLabelValues("recorded").Add(float64(len(res.Records)))
	r.spans.WithLabelValues("rejected").Add(float64(len(res.Rejected)))
	r.spans.WithLabelValues("ignored").Add(float64(res.Ignored))
	resp := &coltracepb.ExportTraceServiceResponse{}
	if len(res.Rejected) > 0 {
		r.opt.Logger.Debug("OTLP spans rejected", "project", project.Name, "rejected", len(res.Rejected), "first", res.Rejected[0].String())
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{
			RejectedSpans: int64(len(res.Rejected)),
			ErrorMessage:  rejectionMessage(res.Rejected),
		}
	}
	return reply(c, enc, http.StatusOK, resp)
}

// maxListed bounds the refusals a partial-success message spells out.
const maxListed = 5

func rejectionMessage(rej []Rejection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d GenAI span(s) refused: ", len(rej))
	for i, r := range rej[:min(len(rej), maxListed)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	if len(rej) > maxListed {
		fmt.Fprintf(&b, "; and %d more", len(rej)-maxListed)
	}
	return b.String()
}

// reply writes an OTLP response message (ExportTraceServiceResponse, or google.rpc.Status for an
// error) in the encoding of the request, as the OTLP specification asks.
func reply(c echo.Context, enc encoding, code int, m proto.Message) error {
	var (
		b   []byte
		err error
		ct  = "application/x-protobuf"
	)
	if enc == encJSON {
		b, err = protojson.Marshal(m)
		ct = echo.MIMEApplicationJSON
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		return fmt.Errorf("encode OTLP response: %w", err)
	}
	return c.Blob(code, ct, b)
}

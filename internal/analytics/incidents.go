package analytics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/money"
)

// Incidents: periods of trouble detected from the ledger (docs/incidents.md defines each kind and
// its parameters, IncidentParams).
//
// Errors, retries and fallbacks are judged per model (provider and model, over every service, so
// an outage of one model is one incident) minute by minute, from the load rollup's minutes of the
// hours worth reading (recovery from the raw attempts): a minute is
// troubled when its error rate reaches the model's threshold, when its calls took StormAttempts
// attempts each or more, or when a fallback model answered for it. Troubled minutes at most Gap
// minutes apart make one period, and a period is an incident when its totals pass the minimums: a
// retry_storm when its calls took StormAttempts or more each and the model itself still answered
// StormAnswered of them, else an error_spike when its error rate reached the threshold, else a
// fallback_surge. A cache_broken incident runs from the hour a model's cache broke (cache_since.go)
// to the hour it was read back again; a spend_spike is a run of hours whose spend passed
// SpendFactor times the usual spend of that hour of the day.

// Incident kinds.
const (
	KindErrorSpike    = "error_spike"
	KindRetryStorm    = "retry_storm"
	KindFallbackSurge = "fallback_surge"
	KindCacheBroken   = "cache_broken"
	KindSpendSpike    = "spend_spike"
)

// IncidentParams are the detection parameters; DefaultIncidentParams are those ledgerd uses.
type IncidentParams struct {
	// ErrorFloor and ErrorFactor: a model's error threshold is the larger of ErrorFloor and
	// ErrorFactor times its error rate over the whole window read.
	ErrorFloor  float64
	ErrorFactor float64
	// MinFailed is the fewest failed attempts an error_spike holds.
	MinFailed int64
	// StormAttempts is the attempts per call of a retry storm; MinExtra the fewest extra attempts
	// (attempts beyond the first of each call) it holds; StormAnswered the least share of its calls
	// the model itself still answered (below it, retries met a model that is down: an error spike).
	StormAttempts float64
	MinExtra      int64
	StormAnswered float64
	// MinFallbacks is the fewest fallback answers a fallback_surge holds.
	MinFallbacks int64
	// Gap is the longest run of untroubled minutes inside one period; a period whose last troubled
	// minute is less than Gap before now is still open.
	Gap time.Duration
	// RecoveryWindow is the window recovery is judged on, RecoveryShare the share of its calls
	// that must get an answer by an attempt that began at most RecoveryReach after the window,
	// RecoveryLimit how long after the end it is looked for, RecoveryFirst how far the first read
	// goes (the rest is read only for the incidents not recovered by then).
	RecoveryWindow time.Duration
	RecoveryShare  float64
	RecoveryReach  time.Duration
	RecoveryLimit  time.Duration
	RecoveryFirst  time.Duration
	// CacheMinCalls is the fewest cache-writing calls a cache_broken incident holds.
	CacheMinCalls int64
	// SpendFactor, SpendDays and MinExtraSpend: an hour is a spike when its spend passes
	// SpendFactor times the median spend of the same local hour over the SpendDays days before, by
	// at least MinExtraSpend.
	SpendFactor   int64
	SpendDays     int
	MinExtraSpend money.Nanos
}

// DefaultIncidentParams are the parameters docs/incidents.md documents.
var DefaultIncidentParams = IncidentParams{
	ErrorFloor: 0.2, ErrorFactor: 3, MinFailed: 10,
	StormAttempts: 2, MinExtra: 10, StormAnswered: 0.1, MinFallbacks: 5,
	Gap:            2 * time.Minute,
	RecoveryWindow: 10 * time.Second, RecoveryShare: 0.95, RecoveryReach: time.Minute,
	RecoveryLimit: 30 * time.Minute, RecoveryFirst: 30 * time.Second,
	CacheMinCalls: DefaultMinCalls,
	SpendFactor:   3, SpendDays: 7, MinExtraSpend: 1_000_000_000,
}

// MaxIncidentRange is the longest range incidents are looked for in at once.
const MaxIncidentRange = 31 * 24 * time.Hour

// Incident is one period of trouble. EndedAt is nil while it is open. The scope names what it
// concerns: the model (error_spike, retry_storm, fallback_surge), the service, operation and model
// of a cache (cache_broken), nothing for the project's spend (spend_spike).
type Incident struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Provider  string     `json:"provider,omitempty"`
	Model     string     `json:"model,omitempty"`
	Service   string     `json:"service,omitempty"`
	Operation string     `json:"operation,omitempty"`
	// CallsAffected are the logical calls of the scope during the incident; FailedCalls those of
	// them that got no answer; FallbackAnswers those a fallback model answered; ExtraAttempts the
	// attempts beyond one a call.
	CallsAffected   int64 `json:"calls_affected"`
	FailedCalls     int64 `json:"failed_calls"`
	FallbackAnswers int64 `json:"fallback_answers"`
	ExtraAttempts   int64 `json:"extra_attempts"`
	// WastedUSD is the cost of the attempts that gave no answer; ExtraUSD, for a broken cache, what
	// its calls cost beyond as many while the cache worked, for a spend spike the spend beyond the
	// usual. Nil where unpriced or not defined for the kind.
	WastedUSD *money.Nanos `json:"wasted_usd"`
	ExtraUSD  *money.Nanos `json:"extra_usd"`
	// RecoverySeconds, once a model's incident is over, is the time from its end to the start of
	// the first RecoveryWindow (counted from the end, windows without calls skipped) in which
	// RecoveryShare of the calls that began got an answer from an attempt that began at most
	// RecoveryReach after the window; nil while open, or not found within RecoveryLimit.
	RecoverySeconds *int64 `json:"recovery_seconds"`
}

// Open tells whether the incident is still going on.
func (in Incident) Open() bool { return in.EndedAt == nil }

// IncidentList is the answer of GET /v1/incidents: the incidents that overlap [From, To), the
// latest first.
type IncidentList struct {
	From      time.Time  `json:"from"`
	To        time.Time  `json:"to"`
	Incidents []Incident `json:"incidents"`
}

// Incidents detects the incidents of f's project that overlap f's range (the last 7 local days by
// default, rounded outward to whole hours) with DefaultIncidentParams. Filters other than the
// project are not applied: an incident is judged on the whole of its scope.
func (s *Service) Incidents(ctx context.Context, f Filter) (IncidentList, error) {
	return s.incidents(ctx, f, DefaultIncidentParams, false)
}

// OpenIncidents lists those of Incidents' that are still open: the same incidents, found with
// less reading, for the Overview, which shows them on every load. A broken cache that is still
// open needs only where its model's cache stands now, which the local days' summaries give up to
// the hour they were made, so today's hours before the range are not read one by one
// (cacheIncidents); and the recovery of the incidents that ended is not looked for.
func (s *Service) OpenIncidents(ctx context.Context, f Filter) (IncidentList, error) {
	return s.incidents(ctx, f, DefaultIncidentParams, true)
}

// incidents finds the incidents of f's range with the parameters p; only the open ones when open.
func (s *Service) incidents(ctx context.Context, f Filter, p IncidentParams, open bool) (IncidentList, error) {
	from, to, err := s.window(f.From, f.To, true)
	if err != nil {
		return IncidentList{}, err
	}
	if to.Sub(from) > MaxIncidentRange {
		return IncidentList{}, badParam("from", "incidents are looked for in at most %d days at once", int(MaxIncidentRange/(24*time.Hour)))
	}
	now := s.now()
	// The models' hours, read once for the model and the spend incidents.
	mFrom, mTo := modelRange(from, to, now, p)
	sFrom, sTo := spendRange(from, to, now, p)
	if sFrom.Before(mFrom) {
		mFrom = sFrom
	}
	if sTo.After(mTo) {
		mTo = sTo
	}
	// The models' hours and minutes and the caches' hours are read at once, on two connections:
	// the caches need nothing of the models'.
	var (
		hours          []modelHour
		models, caches []Incident
	)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		days, err := s.incidentDays(ectx, f.ProjectID, mFrom, now)
		if err != nil {
			return err
		}
		if hours, err = s.modelHours(ectx, f.ProjectID, mFrom, mTo, now, days); err != nil {
			return err
		}
		models, err = s.modelIncidents(ectx, f.ProjectID, from, to, now, hours, days, p, open)
		return err
	})
	eg.Go(func() (err error) {
		caches, err = s.cacheIncidents(ectx, f.ProjectID, from, to, now, p, open)
		return err
	})
	if err := eg.Wait(); err != nil {
		return IncidentList{}, err
	}
	out := append(models, caches...)
	out = append(out, s.spendIncidents(from, to, now, hours, p)...)
	if open {
		out = slices.DeleteFunc(out, func(in Incident) bool { return !in.Open() })
	}
	for i := range out {
		in := &out[i]
		in.StartedAt = in.StartedAt.In(s.tz)
		if in.EndedAt != nil {
			e := in.EndedAt.In(s.tz)
			in.EndedAt = &e
		}
		in.ID = fmt.Sprintf("%s-%d-%s", in.Kind, in.StartedAt.Unix(), scopeID(*in))
	}
	slices.SortFunc(out, func(a, b Incident) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	if out == nil {
		out = []Incident{}
	}
	return IncidentList{From: from.In(s.tz), To: to.In(s.tz), Incidents: out}, nil
}

// scopeID is the scope of an incident as part of its id.
func scopeID(in Incident) string {
	id := ""
	for _, v := range []string{in.Provider, in.Model, in.Service, in.Operation} {
		if v != "" {
			id += "/" + v
		}
	}
	if id == "" {
		return "project"
	}
	return id[1:]
}

// overlaps tells whether a period [start, end) (end nil: open) overlaps [from, to).
func overlaps(start time.Time, end *time.Time, from, to time.Time) bool {
	return start.Before(to) && (end == nil || end.After(from))
}

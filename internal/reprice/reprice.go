// Package reprice recomputes the stored costs of raw attempts with a price catalog, for when
// prices were missing or wrong when the attempts were ingested (a model added to the price file
// later, a corrected rate, a price change with a past effective date).
//
// # What a reprice does
//
// Run prices every raw attempt that started in [From, To) (optionally only one model's) with the
// catalog it is given, exactly as the ingest writer would today, and writes the new cost_nanos,
// nocache_cost_nanos and price_id of the attempts whose figures changed. In the same transaction it
// adds, per rollup key, the difference between the changed attempts' new and old sums to
// rollup_hourly, rollup_daily (local date in settings 'timezone'), the narrow daily rollups
// (rollup.DailyBy: the daily deltas summed per model, per service and operation, per tenant),
// rollup_cache_hourly and cache_prefixes, and the load rollup's wasted cost and unpriced attempts
// (rollup_load_minute, per minute), using the writer's own aggregate expressions
// (rollup.Sums, CacheSums, LoadSums), so every rollup keeps equalling a rebuild from raw. Either everything is
// written or nothing is. A second run with the same catalog changes nothing.
//
// Rows are streamed through a cursor in chunks (Options.ChunkRows), so memory stays bounded
// whatever the range: each chunk's changed attempts are copied into a temporary table and updated
// with one UPDATE ... FROM, and their rollup deltas are accumulated in temporary tables. The deltas
// are added to the rollups only at the end, under the rollup fold lock (rollup.Fold), so the
// writers' folds wait for the reprice only for the last moments of its transaction; the rows the
// deltas touch are counted first, and the reprice fails if one is missing.
//
// # Concurrency
//
// Only one reprice runs at a time: a second one fails at once with ErrBusy (advisory lock
// LockKey). Ingest goes on during a reprice. Attempts committed after the reprice's snapshot are not
// repriced: the writer of the running server priced them with the catalog it loaded at start, and
// their rollup contributions are its own; the reprice only adds deltas, so both stay exact. Hence:
// run reprice with the same price file the servers use (--prices / LEDGERD_PRICES), and restart
// the servers when that file changed, so that new attempts are priced like the repriced ones. A
// redelivery of an attempt being repriced waits for the reprice to commit before it is skipped as
// a duplicate; it never changes a rollup.
//
// A rollup rebuild (analytics.Rebuild) may run meanwhile: it holds the rollup fold lock
// (rollup.Fold) for its whole transaction, as the reprice does from applying its deltas to
// committing, so it recounts either before the reprice's deltas land (from the old costs, which
// the deltas then correct) or after the reprice committed. A reprice fails, and writes nothing, if a rebuild
// changed the timezone its daily deltas were bucketed in.
package reprice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// ErrBusy reports that another reprice holds the lock; run again when it has finished.
var ErrBusy = errors.New("another reprice is running")

// DefaultChunkRows is how many attempts a reprice reads and writes at a time.
const DefaultChunkRows = 10_000

// Options says what to reprice.
type Options struct {
	// From and To bound the attempts' started_at: [From, To).
	From, To time.Time
	// Model, when set, limits the reprice to attempts recorded under this model name (ignoring
	// case) or under any name the catalog resolves to the same model (an alias, a dated id).
	Model string
	// DryRun computes the report in a read-only transaction and writes nothing.
	DryRun bool
	// ChunkRows bounds the attempts held in memory at once (DefaultChunkRows).
	ChunkRows int
	// Logger receives one progress line per chunk (discarded when nil).
	Logger *slog.Logger
}

// Report says what a reprice changed (or, for a dry run, would change).
type Report struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Model  string    `json:"model,omitempty"`
	DryRun bool      `json:"dry_run"`
	Totals Figures   `json:"totals"`
	// Models breaks the totals down by provider and model as recorded, sorted by name.
	Models []ModelFigures `json:"models"`
}

// Figures are the counts and amounts of one set of attempts. Costs sum priced attempts only.
type Figures struct {
	// Attempts were examined; Changed had their cost, cost without caching or price version
	// rewritten.
	Attempts int64 `json:"attempts"`
	Changed  int64 `json:"changed"`
	// NewlyPriced had no cost before and have one now; NewlyUnpriced the reverse. Unpriced have
	// no cost after the reprice.
	NewlyPriced   int64       `json:"newly_priced"`
	NewlyUnpriced int64       `json:"newly_unpriced"`
	Unpriced      int64       `json:"unpriced"`
	Before        money.Nanos `json:"cost_before_usd"`
	After         money.Nanos `json:"cost_after_usd"`
	Delta         money.Nanos `json:"delta_usd"`
}

// ModelFigures are the figures of one recorded provider and model.
type ModelFigures struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Figures
}

func (f *Figures) add(oldCost, newCost *int64, changed bool) {
	f.Attempts++
	if changed {
		f.Changed++
	}
	switch {
	case oldCost == nil && newCost != nil:
		f.NewlyPriced++
	case oldCost != nil && newCost == nil:
		f.NewlyUnpriced++
	}
	if oldCost != nil {
		f.Before += money.Nanos(*oldCost)
	}
	if newCost != nil {
		f.After += money.Nanos(*newCost)
	} else {
		f.Unpriced++
	}
	f.Delta = f.After - f.Before
}

type seriesInfo struct{ provider, model string }

// raw is one attempt as the cursor reads it.
type raw struct {
	project                          int64
	attemptID                        string
	startedAt                        time.Time
	series                           int64
	batch                            bool
	in, out, cw, cw1h, cr, reasoning int64
	cost, nocache                    *int64
	priceID                          *int32
	// What the catalog makes of it.
	newCost, newNoCache *int64
	newVersion          *pricing.Version
	changed             bool
}

// Run reprices the attempts opt selects with cat, in one transaction, and reports what changed.
func Run(ctx context.Context, st *store.Store, cat *pricing.Catalog, opt Options) (Report, error) {
	if opt.ChunkRows <= 0 {
		opt.ChunkRows = DefaultChunkRows
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	rep := Report{From: opt.From.UTC(), To: opt.To.UTC(), Model: opt.Model, DryRun: opt.DryRun, Models: []ModelFigures{}}
	if opt.From.IsZero() || opt.To.IsZero() || !opt.From.Before(opt.To) {
		return rep, fmt.Errorf("reprice: the range [%s, %s) is empty", opt.From.Format(time.RFC3339), opt.To.Format(time.RFC3339))
	}
	var names []string
	if opt.Model != "" {
		var err error
		if names, err = modelNames(ctx, st, cat, opt.Model); err != nil {
			return rep, err
		}
		if len(names) == 0 {
			return rep, nil
		}
	}
	txOpt := pgx.TxOptions{}
	if opt.DryRun {
		txOpt.AccessMode = pgx.ReadOnly
	}
	tx, err := st.Pool.BeginTx(ctx, txOpt)
	if err != nil {
		return rep, fmt.Errorf("reprice: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var tz string
	if !opt.DryRun {
		var locked bool
		if err := tx.QueryRow(ctx, lockSQL, int64(LockKey)).Scan(&locked); err != nil {
			return rep, fmt.Errorf("reprice: lock: %w", err)
		}
		if !locked {
			return rep, ErrBusy
		}
		if _, err := tx.Exec(ctx, createTempSQL); err != nil {
			return rep, fmt.Errorf("reprice: create work tables: %w", err)
		}
		if err := tx.QueryRow(ctx, timezoneSQL).Scan(&tz); err != nil {
			return rep, fmt.Errorf("reprice: read timezone: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, cursorSQL, opt.From, opt.To, names); err != nil {
		return rep, fmt.Errorf("reprice: open cursor: %w", err)
	}
	// Read after the cursor's snapshot, so every series and price version its rows name is here.
	series, keys, err := dictionaries(ctx, tx)
	if err != nil {
		return rep, err
	}
	r := &run{st: st, tx: tx, cat: cat, opt: opt, tz: tz, series: series, keys: keys, byModel: map[seriesInfo]*Figures{}}
	for {
		n, err := r.chunk(ctx, &rep.Totals)
		if err != nil {
			return rep, err
		}
		if n < opt.ChunkRows {
			break
		}
	}
	for k, f := range r.byModel {
		rep.Models = append(rep.Models, ModelFigures{Provider: k.provider, Model: k.model, Figures: *f})
	}
	slices.SortFunc(rep.Models, func(a, b ModelFigures) int {
		return strings.Compare(a.Provider+"\x00"+a.Model, b.Provider+"\x00"+b.Model)
	})
	if opt.DryRun {
		return rep, nil
	}
	if err := applyDeltas(ctx, tx, tz); err != nil {
		return rep, err
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, fmt.Errorf("reprice: commit: %w", err)
	}
	return rep, nil
}

// modelNames returns the recorded model names that model selects: the same name ignoring case,
// and every name the catalog resolves to the same model.
func modelNames(ctx context.Context, st *store.Store, cat *pricing.Catalog, model string) ([]string, error) {
	rows, err := st.Pool.Query(ctx, `SELECT DISTINCT provider, model FROM series`)
	if err != nil {
		return nil, fmt.Errorf("reprice: list models: %w", err)
	}
	recorded, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (seriesInfo, error) {
		var s seriesInfo
		return s, row.Scan(&s.provider, &s.model)
	})
	if err != nil {
		return nil, fmt.Errorf("reprice: list models: %w", err)
	}
	want, known := cat.Lookup("", model)
	var names []string
	for _, s := range recorded {
		match := strings.EqualFold(strings.TrimSpace(s.model), strings.TrimSpace(model))
		if m, ok := cat.Lookup(s.provider, s.model); known && ok && m.Provider == want.Provider && m.ID == want.ID {
			match = true
		}
		if match && !slices.Contains(names, s.model) {
			names = append(names, s.model)
		}
	}
	return names, nil
}

// dictionaries reads the provider and model of every series and the key of every price version.
func dictionaries(ctx context.Context, tx pgx.Tx) (map[int64]seriesInfo, map[int32]string, error) {
	series := map[int64]seriesInfo{}
	var id int64
	var s seriesInfo
	rows, _ := tx.Query(ctx, seriesSQL)
	if _, err := pgx.ForEachRow(rows, []any{&id, &s.provider, &s.model}, func() error { series[id] = s; return nil }); err != nil {
		return nil, nil, fmt.Errorf("reprice: read series: %w", err)
	}
	keys := map[int32]string{}
	var pid int32
	var key string
	rows, _ = tx.Query(ctx, `SELECT id, key FROM price_versions`)
	if _, err := pgx.ForEachRow(rows, []any{&pid, &key}, func() error { keys[pid] = key; return nil }); err != nil {
		return nil, nil, fmt.Errorf("reprice: read price versions: %w", err)
	}
	return series, keys, nil
}

// run is the state of one reprice between chunks.
type run struct {
	st      *store.Store
	tx      pgx.Tx
	cat     *pricing.Catalog
	opt     Options
	tz      string
	series  map[int64]seriesInfo
	keys    map[int32]string
	byModel map[seriesInfo]*Figures
	chunks  int
}

// chunk reprices the next chunk of the cursor and returns how many attempts it read.
func (r *run) chunk(ctx context.Context, totals *Figures) (int, error) {
	rows, _ := r.tx.Query(ctx, fmt.Sprintf(fetchSQL, r.opt.ChunkRows))
	var (
		batch []raw
		a     raw
	)
	_, err := pgx.ForEachRow(rows, []any{&a.project, &a.attemptID, &a.startedAt, &a.series, &a.batch,
		&a.in, &a.out, &a.cw, &a.cw1h, &a.cr, &a.reasoning, &a.cost, &a.nocache, &a.priceID}, func() error {
		batch = append(batch, a)
		a.cost, a.nocache, a.priceID = nil, nil, nil // the next row gets its own
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reprice: read attempts: %w", err)
	}
	var (
		changed  []*raw
		versions []store.PriceVersion
	)
	for i := range batch {
		a := &batch[i]
		s, ok := r.series[a.series]
		if !ok {
			return 0, fmt.Errorf("reprice: attempt %s names series %d, which does not exist", a.attemptID, a.series)
		}
		r.price(a, s)
		f := r.byModel[s]
		if f == nil {
			f = &Figures{}
			r.byModel[s] = f
		}
		f.add(a.cost, a.newCost, a.changed)
		totals.add(a.cost, a.newCost, a.changed)
		if a.changed {
			changed = append(changed, a)
			if v := a.newVersion; v != nil {
				versions = append(versions, store.PriceVersion{Key: v.Key, Provider: v.Provider, Model: v.Model, EffectiveFrom: v.EffectiveFrom})
			}
		}
	}
	r.chunks++
	r.opt.Logger.Info("reprice chunk", "chunk", r.chunks, "attempts", len(batch), "changed", len(changed))
	if r.opt.DryRun || len(changed) == 0 {
		return len(batch), nil
	}
	// Price versions are a dictionary outside the transaction: a version recorded by a reprice
	// that then fails is merely known early.
	ids, err := r.st.PriceIDs(ctx, versions)
	if err != nil {
		return 0, fmt.Errorf("reprice: %w", err)
	}
	if err := r.write(ctx, changed, ids); err != nil {
		return 0, err
	}
	return len(batch), nil
}

// price computes a's cost with the catalog, as ingest.CatalogPrice does at ingest, and whether any
// stored figure changes.
func (r *run) price(a *raw, s seriesInfo) {
	c, err := r.cat.Cost(pricing.Usage{Provider: s.provider, Model: s.model, At: a.startedAt,
		InputTokens: a.in, OutputTokens: a.out, CacheWriteTokens: a.cw, CacheWrite1hTokens: a.cw1h,
		CacheReadTokens: a.cr, ReasoningTokens: a.reasoning, Batch: a.batch})
	oldKey := ""
	if a.priceID != nil {
		oldKey = r.keys[*a.priceID]
	}
	if err != nil {
		a.changed = a.cost != nil || a.nocache != nil || a.priceID != nil
		return
	}
	total, nocache := int64(c.Total), int64(c.NoCache)
	a.newCost, a.newNoCache, a.newVersion = &total, &nocache, &c.Version
	a.changed = a.cost == nil || *a.cost != total || a.nocache == nil || *a.nocache != nocache || oldKey != c.Version.Key
}

// write stores the new figures of a chunk's changed attempts and accumulates their rollup deltas.
func (r *run) write(ctx context.Context, changed []*raw, ids map[string]int32) error {
	src := make([][]any, len(changed))
	for i, a := range changed {
		var pid *int32
		if a.newVersion != nil {
			id := ids[a.newVersion.Key]
			pid = &id
		}
		src[i] = []any{a.project, a.attemptID, a.startedAt, a.cost, a.nocache, a.newCost, a.newNoCache, pid}
	}
	if _, err := r.tx.CopyFrom(ctx, pgx.Identifier{"reprice_chunk"}, chunkCols, pgx.CopyFromRows(src)); err != nil {
		return fmt.Errorf("reprice: load chunk: %w", err)
	}
	if _, err := r.tx.Exec(ctx, `ANALYZE reprice_chunk`); err != nil {
		return fmt.Errorf("reprice: analyze chunk: %w", err)
	}
	var n int
	if err := r.tx.QueryRow(ctx, chunkSQL, r.tz).Scan(&n); err != nil {
		return fmt.Errorf("reprice: update attempts: %w", err)
	}
	if n != len(changed) {
		return fmt.Errorf("reprice: updated %d attempts of %d read: the raw table changed underneath", n, len(changed))
	}
	if _, err := r.tx.Exec(ctx, `TRUNCATE reprice_chunk`); err != nil {
		return fmt.Errorf("reprice: clear chunk: %w", err)
	}
	return nil
}

// applyDeltas adds the accumulated deltas to the rollups. It first folds the rollup deltas ingest
// commits left pending (rollup.Fold), so every attempt the reprice read is counted in the rollups
// and cache_prefixes it adjusts; the fold lock it then holds until commit keeps the writers' folds
// and rebuilds off those rows meanwhile.
func applyDeltas(ctx context.Context, tx pgx.Tx, tz string) error {
	if _, err := rollup.Fold(ctx, tx); err != nil {
		return fmt.Errorf("reprice: %w", err)
	}
	for _, s := range applySQL {
		var keys, found int64
		if err := tx.QueryRow(ctx, s.check).Scan(&keys, &found); err != nil {
			return fmt.Errorf("reprice: check %s: %w", s.table, err)
		}
		if keys != found {
			return fmt.Errorf("reprice: %d of the %d %s rows to adjust do not exist: the rollups disagree with the raw attempts", keys-found, keys, s.table)
		}
	}
	// A rollup rebuild holds the fold lock, so none can commit from here on; one that committed
	// during the reprice recounted from the old costs, which the deltas correct, unless it changed
	// the timezone the daily deltas were bucketed in.
	var now string
	if err := tx.QueryRow(ctx, timezoneSQL).Scan(&now); err != nil {
		return fmt.Errorf("reprice: read timezone: %w", err)
	}
	if now != tz {
		return fmt.Errorf("reprice: the ledger's timezone changed from %s to %s during the reprice: run it again", tz, now)
	}
	for _, s := range applySQL {
		if err := tx.QueryRow(ctx, s.update).Scan(new(int64)); err != nil {
			return fmt.Errorf("reprice: update %s: %w", s.table, err)
		}
	}
	if _, err := tx.Exec(ctx, rollup.TouchRepricedDaysSQL); err != nil {
		return fmt.Errorf("reprice: note daily rollups' days: %w", err)
	}
	// The cache days summed from the hours changed are summed again (rollup.SummarizeCacheDays).
	if _, err := tx.Exec(ctx, rollup.MarkRepricedCacheDaysSQL); err != nil {
		return fmt.Errorf("reprice: note cache days: %w", err)
	}
	return nil
}

// WriteText prints the report for people: the totals, then one line per model.
func (rep Report) WriteText(w io.Writer) error {
	verb, scope := "Repriced", ""
	if rep.DryRun {
		verb = "Dry run, nothing written: would reprice"
	}
	if rep.Model != "" {
		scope = fmt.Sprintf(" recorded as model %s (or a name the catalog resolves to it)", rep.Model)
	}
	t := rep.Totals
	fmt.Fprintf(w, "%s attempts%s that started in [%s, %s).\n", verb, scope, rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339))
	fmt.Fprintf(w, "Examined %s attempts; changed %s: %s newly priced, %s newly unpriced, %s unpriced now.\n",
		numfmt.Count(t.Attempts), numfmt.Count(t.Changed), numfmt.Count(t.NewlyPriced), numfmt.Count(t.NewlyUnpriced),
		numfmt.Count(t.Unpriced))
	fmt.Fprintf(w, "Cost of the priced attempts: %s before, %s after (%s).\n", t.Before.USDFine(), t.After.USDFine(), signed(t.Delta))
	if len(rep.Models) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tATTEMPTS\tCHANGED\tNEWLY PRICED\tNEWLY UNPRICED\tUNPRICED\tBEFORE\tAFTER\tDELTA")
	for _, m := range rep.Models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Provider, m.Model, numfmt.Count(m.Attempts),
			numfmt.Count(m.Changed), numfmt.Count(m.NewlyPriced), numfmt.Count(m.NewlyUnpriced), numfmt.Count(m.Unpriced),
			m.Before.USDFine(), m.After.USDFine(), signed(m.Delta))
	}
	return tw.Flush()
}

// signed writes a change of cost with its sign, "+" for a rise or none, "-" for a fall.
func signed(n money.Nanos) string {
	if n < 0 {
		return n.USDFine()
	}
	return "+" + n.USDFine()
}

package rollup

import (
	"context"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Raising the load peaks: a fold's chunks note the minutes they touched (pending_load_touched);
// RaisePeaks takes raiseChunk of them at a time, reads their load rows, sums every grouping of
// org, provider, model and service per minute in Go, and offers each group's busiest minutes and
// lowest headroom to rollup_load_peaks, which keeps what passes. Summing the sixteen groupings in
// SQL (GROUP BY CUBE) cost more than the rest of a backfill's fold together: on a week's backfill
// of 100,000 records it took 3.4 s against 2.4 s for the hourly rollups (docs/performance.md).
// LoadRebuildSQL counts the same peaks in SQL from scratch; the twin and rebuild tests compare.

// Headroom is a rate limit and what remained of it as one attempt, or the lowest of a group,
// reported it; Limit 0 means none was reported. The writer, RaisePeaks and the headroom alert keep
// the lowest by Below.
type Headroom struct{ Remaining, Limit int64 }

// Below tells whether h is a lower headroom than o, as SQL headroom_below: the smaller share
// remaining (compared exactly, in 128 bits), or of equal shares the larger limit. No headroom is
// never lower, and any is lower than none.
func (h Headroom) Below(o Headroom) bool {
	if h.Limit == 0 {
		return false
	}
	if o.Limit == 0 {
		return true
	}
	ahi, alo := bits.Mul64(uint64(h.Remaining), uint64(o.Limit))
	bhi, blo := bits.Mul64(uint64(o.Remaining), uint64(h.Limit))
	if ahi != bhi || alo != blo {
		return ahi < bhi || ahi == bhi && alo < blo
	}
	return h.Limit > o.Limit
}

// raiseChunk is how many touched minutes RaisePeaks recounts at a time: on a ledger of many
// services and models a minute holds a few hundred load rows, so a chunk is a bounded piece of
// work, and the peaks of a backfill of any size are raised in bounded steps.
const raiseChunk = 240

// takeTouchedSQL removes up to $1 of the touched minutes, the earliest first, and returns them.
const takeTouchedSQL = `DELETE FROM pending_load_touched WHERE (project_id, bucket) IN (
		SELECT project_id, bucket FROM pending_load_touched ORDER BY 1, 2 LIMIT $1)
	RETURNING project_id, bucket, day`

// minuteRowsSQL reads the load rows of the minutes ($1 projects, $2 minutes, $3 their local days):
// the day, the key's names, then LoadCols.
var minuteRowsSQL = fmt.Sprintf(`SELECT t.day, r.project_id, r.bucket, r.org, r.provider, r.model, r.service, %s
	FROM unnest($1::int8[], $2::timestamptz[], $3::date[]) t(project_id, bucket, day)
	JOIN rollup_load_minute r USING (project_id, bucket)`, strings.Join(prefixed("r.", LoadCols), ", "))

// raisePeaksSQL offers peak rows (the arrays $1 … $24, in peakKey and peakCols order) to
// rollup_load_peaks, writing only those that pass the stored peak (a day's busiest minute is
// passed rarely), and returns how many it wrote.
var raisePeaksSQL = func() string {
	var peakSet, raised []string
	for _, c := range []struct{ v, at, also string }{{"requests", "requests_at", "rate_limited"},
		{"input_tokens", "input_tokens_at", ""}, {"output_tokens", "output_tokens_at", ""}, {"tokens", "tokens_at", ""}} {
		// A row comparison with the minutes swapped: the larger count wins, then the earlier minute.
		cond := fmt.Sprintf("(excluded.%[1]s, r.%[2]s) > (r.%[1]s, excluded.%[2]s)", c.v, c.at)
		cols := []string{c.v, c.at}
		if c.also != "" {
			cols = append(cols, c.also)
		}
		peakSet = append(peakSet, chooseSet(cond, cols...)...)
		raised = append(raised, cond)
	}
	for _, l := range LoadLimits {
		peakSet = append(peakSet, headroomMerge(l)...)
		raised = append(raised, headroomLower(l))
	}
	types := []string{"int8", "int2", "date", "text", "text", "text", "text",
		"int8", "timestamptz", "int8", "int8", "timestamptz", "int8", "timestamptz", "int8", "timestamptz"}
	for range LoadPairCols {
		types = append(types, "int8")
	}
	params := make([]string, len(types))
	for i, t := range types {
		params[i] = fmt.Sprintf("$%d::%s[]", i+1, t)
	}
	return fmt.Sprintf(`WITH pk AS (
		INSERT INTO rollup_load_peaks AS r (%[1]s, %[2]s)
		SELECT * FROM unnest(%[3]s) ORDER BY %[4]s
		ON CONFLICT (%[1]s) DO UPDATE SET %[5]s WHERE %[6]s
		RETURNING 1
	) SELECT count(*) FROM pk`, strings.Join(peakKey, ", "), strings.Join(peakCols, ", "), strings.Join(params, ", "),
		Ordinals(len(peakKey)), strings.Join(peakSet, ", "), strings.Join(raised, " OR "))
}()

// RaisePeaks raises the load peaks at up to raiseChunk of the minutes the folds' chunks touched,
// after waiting for any other fold to finish (it takes the fold lock for the rest of tx), and
// returns how many peak rows it wrote and whether minutes are left for another call. A fold calls
// it, each call in a transaction of its own, once its chunks reach the end of the pending tables.
func RaisePeaks(ctx context.Context, tx pgx.Tx) (wrote int64, more bool, err error) {
	if err := lockFold(ctx, tx); err != nil {
		return 0, false, err
	}
	rows, err := tx.Query(ctx, takeTouchedSQL, raiseChunk)
	if err != nil {
		return 0, false, fmt.Errorf("take touched load minutes: %w", err)
	}
	var (
		projects []int64
		minutes  []time.Time
		days     []time.Time
		project  int64
		minute   time.Time
		day      time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&project, &minute, &day}, func() error {
		projects, minutes, days = append(projects, project), append(minutes, minute), append(days, day)
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("take touched load minutes: %w", err)
	}
	if len(projects) == 0 {
		return 0, false, nil
	}
	var p peaks
	rows, err = tx.Query(ctx, minuteRowsSQL, projects, minutes, days)
	if err != nil {
		return 0, false, fmt.Errorf("read touched load minutes: %w", err)
	}
	r := loadRow{sums: make([]int64, len(LoadSums)), pairs: make([][2]*int64, len(LoadLimits))}
	dest := []any{&r.day, &r.project, &r.bucket, &r.names[0], &r.names[1], &r.names[2], &r.names[3]}
	for i := range r.sums {
		dest = append(dest, &r.sums[i])
	}
	for i := range r.pairs {
		dest = append(dest, &r.pairs[i][0], &r.pairs[i][1])
	}
	if _, err = pgx.ForEachRow(rows, dest, func() error { p.add(&r); return nil }); err != nil {
		return 0, false, fmt.Errorf("read touched load minutes: %w", err)
	}
	if err := tx.QueryRow(ctx, raisePeaksSQL, p.args()...).Scan(&wrote); err != nil {
		return 0, false, fmt.Errorf("raise load peaks: %w", err)
	}
	return wrote, len(projects) == raiseChunk, nil
}

// loadRow is a rollup_load_minute row as RaisePeaks reads it, with the minute's local day.
type loadRow struct {
	day, bucket time.Time
	project     int64
	names       [4]string   // org, provider, model, service
	sums        []int64     // LoadSums
	pairs       [][2]*int64 // LoadLimits' remaining and limit
}

// The positions of LoadSums' columns in loadRow.sums.
var (
	colRequests    = Index(LoadSums, "requests")
	colRateLimited = Index(LoadSums, "rate_limited")
	colInput       = Index(LoadSums, "input_tokens")
	colOutput      = Index(LoadSums, "output_tokens")
)

// peakGroup is a rollup_load_peaks key, its names as numbered by peaks.intern: 0 is the empty
// name, which also stands for a name the grouping does not keep.
type peakGroup struct {
	project int64
	day     int64 // Unix seconds of the local date at UTC midnight
	keep    int16
	names   [4]int32
}

// busiest is a count's busiest minute: the largest count, then the earliest minute.
type busiest struct {
	n, also int64
	at      int64 // Unix seconds
	set     bool
}

func (b *busiest) offer(n, at, also int64) {
	if !b.set || n > b.n || n == b.n && at < b.at {
		*b = busiest{n: n, also: also, at: at, set: true}
	}
}

// peak is what RaisePeaks finds for one group: the busiest minute by requests (with its 429s),
// input, output and total tokens, and the lowest headroom of each of LoadLimits.
type peak struct {
	group                           peakGroup
	requests, input, output, tokens busiest
	lowest                          []Headroom
}

// peaks sums the load rows of the touched minutes per group of every grouping (per group and
// minute) and keeps each group's peak. A row counts into sixteen groups, so the groups are keyed
// by numbers standing for the names, not by the names (hashing four strings sixteen times a row
// took most of a backfill's raise), and the sums lie in one slab.
type peaks struct {
	ids   [4]map[string]int32 // a name's number, per position (org, provider, model, service)
	names [4][]string         // the names by number
	sums  map[groupMinute]int // where a group's minute sums start in slab
	slab  []int64
	found map[peakGroup]int // the group's index in list
	list  []peak
	low   []Headroom // the row's headroom, reused
}

type groupMinute struct {
	g      peakGroup
	minute int64
}

// intern numbers the name at position i, the empty name 0.
func (p *peaks) intern(i int, name string) int32 {
	if name == "" {
		return 0
	}
	id, ok := p.ids[i][name]
	if !ok {
		id = int32(len(p.names[i]))
		p.ids[i][name] = id
		p.names[i] = append(p.names[i], name)
	}
	return id
}

// add counts r into every grouping: keep has a bit per name kept, org 8, provider 4, model 2,
// service 1, as rollup_load_peaks' keep column.
func (p *peaks) add(r *loadRow) {
	if p.sums == nil {
		p.sums, p.found = map[groupMinute]int{}, map[peakGroup]int{}
		for i := range p.ids {
			p.ids[i], p.names[i] = map[string]int32{}, []string{""}
		}
		p.low = make([]Headroom, len(r.pairs))
	}
	for i, pr := range r.pairs {
		p.low[i] = Headroom{}
		if pr[0] != nil && pr[1] != nil {
			p.low[i] = Headroom{*pr[0], *pr[1]}
		}
	}
	var ids [4]int32
	for i, n := range r.names {
		ids[i] = p.intern(i, n)
	}
	minute, width := r.bucket.Unix(), len(r.sums)
	for keep := range int16(16) {
		g := peakGroup{project: r.project, day: r.day.Unix(), keep: keep}
		for i := range ids {
			if keep&(8>>i) != 0 {
				g.names[i] = ids[i]
			}
		}
		k := groupMinute{g, minute}
		at, ok := p.sums[k]
		if !ok {
			at = len(p.slab)
			p.sums[k] = at
			p.slab = append(p.slab, r.sums...)
		} else {
			s := p.slab[at : at+width]
			for i, v := range r.sums {
				s[i] += v
			}
		}
		n, ok := p.found[g]
		if !ok {
			n = len(p.list)
			p.found[g] = n
			p.list = append(p.list, peak{group: g, lowest: make([]Headroom, len(p.low))})
		}
		pk := &p.list[n]
		for i, h := range p.low {
			if h.Below(pk.lowest[i]) {
				pk.lowest[i] = h
			}
		}
	}
}

// args are raisePeaksSQL's arrays: each group's busiest minutes, from the minute sums, and its
// lowest headroom.
func (p *peaks) args() []any {
	width := len(LoadSums)
	for k, at := range p.sums {
		s, pk := p.slab[at:at+width], &p.list[p.found[k.g]]
		pk.requests.offer(s[colRequests], k.minute, s[colRateLimited])
		pk.input.offer(s[colInput], k.minute, 0)
		pk.output.offer(s[colOutput], k.minute, 0)
		pk.tokens.offer(s[colInput]+s[colOutput], k.minute, 0)
	}
	n := len(p.list)
	var (
		projects                                 = make([]int64, n)
		keeps                                    = make([]int16, n)
		days                                     = make([]time.Time, n)
		names                                    [4][]string
		requests, rateLimited, input, output, tk = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		requestsAt, inputAt, outputAt, tokensAt  = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		pairs                                    = make([][]*int64, 2*len(LoadLimits))
	)
	for i := range names {
		names[i] = make([]string, n)
	}
	for i := range pairs {
		pairs[i] = make([]*int64, n)
	}
	at := func(b busiest) time.Time { return time.Unix(b.at, 0).UTC() }
	for i := range p.list {
		pk, g := &p.list[i], p.list[i].group
		projects[i], keeps[i], days[i] = g.project, g.keep, time.Unix(g.day, 0).UTC()
		for j := range names {
			names[j][i] = p.names[j][g.names[j]]
		}
		requests[i], requestsAt[i], rateLimited[i] = pk.requests.n, at(pk.requests), pk.requests.also
		input[i], inputAt[i] = pk.input.n, at(pk.input)
		output[i], outputAt[i] = pk.output.n, at(pk.output)
		tk[i], tokensAt[i] = pk.tokens.n, at(pk.tokens)
		for j, h := range pk.lowest {
			if h.Limit != 0 {
				pairs[2*j][i], pairs[2*j+1][i] = &h.Remaining, &h.Limit
			}
		}
	}
	args := []any{projects, keeps, days, names[0], names[1], names[2], names[3],
		requests, requestsAt, rateLimited, input, inputAt, output, outputAt, tk, tokensAt}
	for _, c := range pairs {
		args = append(args, c)
	}
	return args
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SeriesKey names what an attempt belongs to; rows and rollups store its id.
type SeriesKey struct {
	ProjectID    int64
	Tenant       string
	Service      string
	Operation    string
	Provider     string
	Model        string
	FallbackFrom string
}

// SeriesIDs returns the id of each key, in the order of keys, creating the series that do not exist
// yet. Ids are cached for the life of the process: a series never changes once written, and a
// commit of thousands of records then costs one cache lookup per record.
func (s *Store) SeriesIDs(ctx context.Context, keys []SeriesKey) ([]int64, error) {
	ids := make([]int64, len(keys))
	var unknown []int // indexes of keys not cached
	s.mu.Lock()
	epoch := s.epoch
	for i, k := range keys {
		if id, ok := s.series[k]; ok {
			ids[i] = id
		} else {
			unknown = append(unknown, i)
		}
	}
	s.mu.Unlock()
	if len(unknown) == 0 {
		return ids, nil
	}
	// missing lists each key not cached once; created gets its id below.
	created := map[SeriesKey]int64{}
	var missing []SeriesKey
	for _, i := range unknown {
		if _, dup := created[keys[i]]; !dup {
			created[keys[i]] = 0
			missing = append(missing, keys[i])
		}
	}
	if err := s.createSeries(ctx, missing, created); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.epoch == epoch { // ids looked up across a failover are not kept
		for k, id := range created {
			s.series[k] = id
		}
	}
	s.mu.Unlock()
	for _, i := range unknown {
		ids[i] = created[keys[i]]
	}
	return ids, nil
}

// createSeriesSQL creates the series of the keys given as arrays that do not exist yet and returns
// the id of each, in one statement however many keys: a ledger with thousands of tenants meets new
// series in most commits of a backfill. DO UPDATE (not DO NOTHING) returns the id even when the
// series exists or another replica created it a moment ago. Each key's shape (the key without its
// tenant) is in the list too, and the list goes in order, so the shapes come first and concurrent
// commits take every row, shapes included, in the same order: none waits for another in a cycle.
// The series_shape trigger then finds each key's shape.
const createSeriesSQL = `WITH k AS (
		SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
			AS k(project_id, tenant, service, operation, provider, model, fallback_from)
	)
	INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
	SELECT * FROM k UNION SELECT project_id, '', service, operation, provider, model, fallback_from FROM k
	ORDER BY 1, 2, 3, 4, 5, 6, 7
	ON CONFLICT (project_id, tenant, service, operation, provider, model, fallback_from)
	DO UPDATE SET tenant = excluded.tenant
	RETURNING id, project_id, tenant, service, operation, provider, model, fallback_from`

// createSeries creates (or finds) the series of keys, all distinct, and sets each one's id in ids.
func (s *Store) createSeries(ctx context.Context, keys []SeriesKey, ids map[SeriesKey]int64) error {
	cols := make([][]string, 6)
	projects := make([]int64, len(keys))
	for i, k := range keys {
		projects[i] = k.ProjectID
		for c, v := range []string{k.Tenant, k.Service, k.Operation, k.Provider, k.Model, k.FallbackFrom} {
			cols[c] = append(cols[c], v)
		}
	}
	rows, err := s.Pool.Query(ctx, createSeriesSQL, projects, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
	if err != nil {
		return fmt.Errorf("resolve series: %w", err)
	}
	var (
		id int64
		k  SeriesKey
	)
	got := make(map[SeriesKey]int64, len(keys))
	if _, err := pgx.ForEachRow(rows, []any{&id, &k.ProjectID, &k.Tenant, &k.Service, &k.Operation, &k.Provider, &k.Model,
		&k.FallbackFrom}, func() error {
		got[k] = id
		return nil
	}); err != nil {
		return fmt.Errorf("resolve series: %w", err)
	}
	for _, k := range keys {
		id, ok := got[k]
		if !ok {
			return fmt.Errorf("resolve series: no id for %+v", k)
		}
		ids[k] = id
	}
	return nil
}

// PriceVersion identifies one price of one model from one date, as recorded beside each cost.
type PriceVersion struct {
	Key           string
	Provider      string
	Model         string
	EffectiveFrom time.Time
}

// PriceIDs records each price version key and returns its id, cached like series ids.
func (s *Store) PriceIDs(ctx context.Context, versions []PriceVersion) (map[string]int32, error) {
	out := make(map[string]int32, len(versions))
	var missing []PriceVersion
	s.mu.Lock()
	epoch := s.epoch
	for _, v := range versions {
		if id, ok := s.prices[v.Key]; ok {
			out[v.Key] = id
		} else if _, dup := out[v.Key]; !dup {
			out[v.Key] = 0
			missing = append(missing, v)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	batch := &pgx.Batch{}
	for _, v := range missing {
		batch.Queue(`INSERT INTO price_versions (key, provider, model, effective_from) VALUES ($1, $2, $3, $4)
			ON CONFLICT (key) DO UPDATE SET key = excluded.key RETURNING id`,
			v.Key, v.Provider, v.Model, v.EffectiveFrom)
	}
	br := s.Pool.SendBatch(ctx, batch)
	defer br.Close()
	ids := make([]int32, len(missing))
	for i := range missing {
		if err := br.QueryRow().Scan(&ids[i]); err != nil {
			return nil, fmt.Errorf("record price versions: %w", err)
		}
	}
	s.mu.Lock()
	for i, v := range missing {
		if s.epoch == epoch {
			s.prices[v.Key] = ids[i]
		}
		out[v.Key] = ids[i]
	}
	s.mu.Unlock()
	return out, nil
}

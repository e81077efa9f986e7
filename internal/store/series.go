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
	batch := &pgx.Batch{}
	for _, k := range missing {
		// DO UPDATE (not DO NOTHING) so the id comes back even when another replica created the
		// series a moment ago; this runs once per new series per process.
		batch.Queue(`INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (project_id, tenant, service, operation, provider, model, fallback_from)
			DO UPDATE SET tenant = excluded.tenant RETURNING id`,
			k.ProjectID, k.Tenant, k.Service, k.Operation, k.Provider, k.Model, k.FallbackFrom)
	}
	br := s.Pool.SendBatch(ctx, batch)
	defer br.Close()
	for _, k := range missing {
		var id int64
		if err := br.QueryRow().Scan(&id); err != nil {
			return nil, fmt.Errorf("resolve series: %w", err)
		}
		created[k] = id
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

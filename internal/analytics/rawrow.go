package analytics

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// rawRow scans a row as its values as sent (a pgx.RowScanner), for the reads of tens of thousands
// of rows: each column scanned into its own destination cost them about a fifth of a read's CPU
// (docs/performance.md). Every column but text must come in the binary format, which pgx asks
// for the types it knows; the values last until the next row. The columns are read by position,
// so the first row checks they are named cols. The first malformed value is kept in err.
type rawRow struct {
	cols    []string
	vals    [][]byte
	checked bool
	err     error
}

// ScanRow takes the row's values, checking the columns' names and formats on the first row.
func (r *rawRow) ScanRow(rows pgx.Rows) error {
	if !r.checked {
		fields := rows.FieldDescriptions()
		if len(fields) != len(r.cols) {
			return fmt.Errorf("%d columns, want %d", len(fields), len(r.cols))
		}
		for i, f := range fields {
			if f.Name != r.cols[i] {
				return fmt.Errorf("column %d is %s, want %s", i, f.Name, r.cols[i])
			}
			if f.Format != pgx.BinaryFormatCode && f.DataTypeOID != pgtype.TextOID {
				return fmt.Errorf("column %s: format %d, want binary", f.Name, f.Format)
			}
		}
		r.checked = true
	}
	r.vals = rows.RawValues()
	return nil
}

// col is the position of the column named name, which must be one of cols.
func (r *rawRow) col(name string) int {
	i := slices.Index(r.cols, name)
	if i < 0 {
		panic("rawRow: no column " + name)
	}
	return i
}

// fixed is column i's value of n bytes, nil when NULL or of another length (noted in err).
func (r *rawRow) fixed(i, n int) []byte {
	v := r.vals[i]
	if v != nil && len(v) != n {
		if r.err == nil {
			r.err = fmt.Errorf("column %s: %d bytes, want %d", r.cols[i], len(v), n)
		}
		return nil
	}
	return v
}

// text is column i's bytes.
func (r *rawRow) text(i int) []byte { return r.vals[i] }

// int8 is column i's bigint (0 when NULL).
func (r *rawRow) int8(i int) int64 {
	if v := r.fixed(i, 8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// bool is column i's boolean (false when NULL).
func (r *rawRow) bool(i int) bool {
	v := r.fixed(i, 1)
	return v != nil && v[0] != 0
}

// pgEpoch is where PostgreSQL's binary timestamps count their microseconds from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// time is column i's timestamptz, nil when NULL.
func (r *rawRow) time(i int) *time.Time {
	v := r.fixed(i, 8)
	if v == nil {
		return nil
	}
	t := time.UnixMicro(pgEpoch + int64(binary.BigEndian.Uint64(v)))
	return &t
}

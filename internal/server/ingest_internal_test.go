package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ledgerd/ledgerd/schema"
)

// TestAcceptedJSON checks the hand-written answer against what c.JSON (json.Encoder) writes for
// the same IngestResponse.
func TestAcceptedJSON(t *testing.T) {
	for _, c := range []struct{ accepted, duplicates int }{{0, 0}, {1, 0}, {0, 1}, {999, 1}, {16 << 20, 123456}} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(schema.IngestResponse{Accepted: c.accepted, Duplicates: c.duplicates, Rejected: []schema.Rejection{}}); err != nil {
			t.Fatal(err)
		}
		if got := acceptedJSON(c.accepted, c.duplicates); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("acceptedJSON(%d, %d) = %q, want %q", c.accepted, c.duplicates, got, want.Bytes())
		}
	}
}

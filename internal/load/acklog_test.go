package load_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/schema"
)

// TestAckLogRoundTrip checks an ack log reads back to the records it was written from, once each.
func TestAckLogRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 2, 9, 30, 0, 123456789, time.UTC)
	recs := []schema.Attempt{
		{AttemptID: "a-1", AttemptNo: 1, StartedAt: at, Provider: "anthropic", Model: "claude-haiku-5-5", Status: schema.StatusError, InputTokens: 10},
		{AttemptID: "a-2", AttemptNo: 2, StartedAt: at.Add(time.Second), Provider: "anthropic", Model: "claude-haiku-5-5", Status: schema.StatusOK, InputTokens: 100, OutputTokens: 20},
	}
	var buf bytes.Buffer
	for i := range recs {
		line, err := jsonLine(load.AckOf(&recs[i], nil))
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString(line)
		if i == 0 {
			buf.WriteString(line) // logged twice, read once
		}
	}
	acks, err := load.ReadAcks(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := load.Sum(acks)
	want := load.Totals{Records: 2, Requests: 1, Unpriced: 2, InputTokens: 110, OutputTokens: 20}
	if got != want {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	if !acks[0].StartedAt.Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("started_at %s, want %s (microseconds, as stored)", acks[0].StartedAt, at.Truncate(time.Microsecond))
	}
}

func jsonLine(a load.Ack) (string, error) {
	b, err := json.Marshal(a)
	return string(b) + "\n", err
}

// TestReadAcksRejectsGarbage checks a damaged log is reported with its line, not half read.
func TestReadAcksRejectsGarbage(t *testing.T) {
	t.Parallel()
	_, err := load.ReadAcks(strings.NewReader(`{"attempt_id":"a","started_at":"2026-11-02T09:30:00Z"}` + "\n{broken\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("got %v, want an error naming line 2", err)
	}
}

// FuzzReadAcks feeds arbitrary files to the ack log reader: it must return records or an error,
// never panic.
func FuzzReadAcks(f *testing.F) {
	f.Add([]byte(`{"attempt_id":"a","started_at":"2026-11-02T09:30:00Z","attempt_no":1,"cost_nanos":12}` + "\n"))
	f.Add([]byte(`{"attempt_id":"a","started_at":"2026-11-02T09:30:00Z","cost_nanos":null}` + "\n\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		acks, err := load.ReadAcks(bytes.NewReader(data))
		if err == nil {
			_ = load.Sum(acks)
		}
	})
}

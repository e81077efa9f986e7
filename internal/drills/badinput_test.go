package drills

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// serverMaxInFlight is server.Options.MaxInFlight's default: ingest requests admitted at once.
const serverMaxInFlight = 256

// badBodyLimit is the --max-body-bytes the bad-input drill gives ledgerd, so oversized bodies
// stay cheap to send.
const badBodyLimit = 1 << 20

// records returns n valid records as JSON objects that a case can alter.
func records(g *synth.Generator, n int) []map[string]any {
	var out []map[string]any
	for len(out) < n {
		for _, a := range g.Call(time.Now()) {
			raw, _ := json.Marshal(a)
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			out = append(out, m)
		}
	}
	return out[:n]
}

func with(m map[string]any, kv ...any) map[string]any {
	c := make(map[string]any, len(m)+len(kv)/2)
	for k, v := range m {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// bomb is a small gzip body that inflates to n bytes of JSON whitespace.
func bomb(n int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write([]byte("["))
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for i := 0; i < n>>20; i++ {
		_, _ = zw.Write(chunk)
	}
	_ = zw.Close()
	return buf.Bytes()
}

// oneByteReader hides a body's length, so the request goes out chunked.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p) }

type badCase struct {
	name     string // what it guards
	auth     string // Authorization header; "" means the project's key
	ctype    string // Content-Type; "" means application/json
	encoding string
	body     []byte
	chunked  bool
	want     int
	field    string // the field the first rejection must name
	text     string // text the answer must contain
	accepted int    // records the answer must report accepted
}

// TestBadInput sends malformed, oversized, compressed-bomb, mistyped, prompt-bearing and
// unauthenticated bodies, and slow clients, while ordinary traffic flows. Each bad request must get
// its own status (400 naming the field, 401, 413, 415); the valid records of a partly valid batch
// and all the ordinary traffic must be stored; ledgerd must stay healthy throughout.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool := connect(t, dbURL)
	p := newProject(t, pool, "drill-bad-input")
	revoked := newProject(t, pool, "drill-bad-input-revoked")
	if err := store.New(pool).RevokeKey(ctx, revoked.Key); err != nil {
		t.Fatal(err)
	}
	srv := startLedgerd(t, dbURL, "--max-body-bytes", fmt.Sprint(badBodyLimit))
	rss := sampleRSS(srv.pid)

	var acks, extraAcks ackBuffer
	background := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 16})),
		Duration: pick(25*time.Second, 75*time.Second), Rate: 500, Batch: 10, Concurrency: 4}, &acks)

	g := synth.New(synth.Options{Seed: 17})
	rec := records(g, 12)
	huge := append([]byte("["), bytes.Repeat([]byte(`{"attempt_id":"x"},`), badBodyLimit/18+1)...)
	huge = append(huge[:len(huge)-1], ']')
	cases := []badCase{
		{name: "malformed JSON is refused as a whole", body: []byte(`{"attempt_id": "a", `), want: 400, text: "unparseable body"},
		{name: "text that is not JSON is refused", body: []byte(`hello ledger`), want: 400, text: "unparseable body"},
		{name: "an empty body is refused", body: []byte{}, want: 400, text: "empty body"},
		{name: "an empty array is refused", body: []byte(`[]`), want: 400, text: "empty array"},
		{name: "a JSON scalar is refused", body: []byte(`42`), want: 400, text: "expected a JSON object or array"},
		{name: "two objects without NDJSON are refused", body: append(mustJSON(rec[0]), mustJSON(rec[1])...), want: 400, text: "unexpected data after"},
		{name: "a string where a number belongs names the field", body: mustJSON([]any{with(rec[0], "attempt_no", "one")}), want: 400, field: "attempt_no"},
		{name: "a negative token count names the field", body: mustJSON([]any{with(rec[0], "input_tokens", -5)}), want: 400, field: "input_tokens"},
		{name: "a number where a string belongs names the field", body: mustJSON([]any{with(rec[0], "model", 42)}), want: 400, field: "model"},
		{name: "a prompt is refused by name", body: mustJSON([]any{with(rec[0], "prompt", "Summarise this contract")}), want: 400, field: "prompt", text: "stores no prompts"},
		{name: "messages are refused by name", body: mustJSON([]any{with(rec[0], "messages", []any{map[string]any{"role": "user", "content": "hi"}})}), want: 400, field: "messages"},
		{name: "a reply is refused by name", body: mustJSON([]any{with(rec[0], "completion", "Dear customer")}), want: 400, field: "completion"},
		{name: "an unknown field is refused by name", body: mustJSON([]any{with(rec[0], "temperature", 0.2)}), want: 400, field: "temperature"},
		{name: "a missing required field is named", body: mustJSON([]any{with(rec[0], "model", nil)}), want: 400, field: "model"},
		{name: "a far-future start is refused", body: mustJSON([]any{with(rec[0], "started_at", "2099-01-01T00:00:00Z")}), want: 400, field: "started_at"},
		{name: "an ok attempt with an error class is refused", body: mustJSON([]any{with(rec[0], "status", "ok", "error_class", "timeout")}), want: 400, field: "error_class"},
		{name: "the valid records of a partly valid batch are stored", body: mustJSON([]any{rec[1], with(rec[2], "prompt", "secret"), rec[3]}), want: 200, accepted: 2},
		{name: "the valid lines of partly valid NDJSON are stored", ctype: "application/x-ndjson",
			body: []byte(string(mustJSON(rec[4])) + "\n{broken\n" + string(mustJSON(rec[5])) + "\n"), want: 200, accepted: 2},
		{name: "gzip bodies are read", encoding: "gzip", body: gzipped(mustJSON([]any{rec[6], rec[7]})), want: 200, accepted: 2},
		{name: "a body over the limit is refused by its length", body: huge, want: 413},
		{name: "a chunked body over the limit is refused while read", body: huge, chunked: true, want: 413},
		{name: "a gzip bomb is refused once inflated past the limit", encoding: "gzip", body: bomb(64 << 20), want: 413},
		{name: "a body that is not gzip is refused", encoding: "gzip", body: mustJSON(rec[8]), want: 400},
		{name: "an unknown Content-Encoding is refused", encoding: "br", body: mustJSON(rec[8]), want: 415},
		{name: "an unknown Content-Type is refused", ctype: "text/plain", body: mustJSON(rec[8]), want: 415},
		{name: "no key is refused", auth: "-", body: mustJSON(rec[9]), want: 401},
		{name: "an unknown key is refused", auth: "Bearer ldg_" + strings.Repeat("0", 48), body: mustJSON(rec[9]), want: 401},
		{name: "a key without the ldg_ prefix is refused", auth: "Bearer sk-ant-xyz", body: mustJSON(rec[9]), want: 401},
		{name: "basic authentication is refused", auth: "Basic dXNlcjpwYXNz", body: mustJSON(rec[9]), want: 401},
		{name: "a revoked key is refused", auth: "Bearer " + revoked.Key, body: mustJSON(rec[9]), want: 401},
	}
	var storedByCases []schema.Attempt
	for _, c := range cases {
		status, answer := postRaw(t, srv.url(), p.Key, c)
		if status != c.want {
			t.Errorf("%s: status %d, want %d (%s)", c.name, status, c.want, answer)
			continue
		}
		var ir schema.IngestResponse
		_ = json.Unmarshal(answer, &ir)
		if c.field != "" && (len(ir.Rejected) == 0 || ir.Rejected[0].Field != c.field) {
			t.Errorf("%s: answer %s does not name field %q", c.name, answer, c.field)
		}
		if c.text != "" && !strings.Contains(string(answer), c.text) {
			t.Errorf("%s: answer %s does not say %q", c.name, answer, c.text)
		}
		if ir.Accepted != c.accepted {
			t.Errorf("%s: accepted %d, want %d", c.name, ir.Accepted, c.accepted)
		}
	}
	// The valid records of the partly valid requests above are part of what must be stored.
	for _, i := range []int{1, 3, 4, 5, 6, 7} {
		var a schema.Attempt
		if err := json.Unmarshal(mustJSON(rec[i]), &a); err != nil {
			t.Fatal(err)
		}
		storedByCases = append(storedByCases, a)
	}
	price, err := prices()
	if err != nil {
		t.Fatal(err)
	}
	for i := range storedByCases {
		_, _ = extraAcks.Write(append(mustJSON(load.AckOf(&storedByCases[i], price)), '\n'))
	}

	r := &report{name: "bad input"}
	r.note("%d kinds of bad request answered with the right status", len(cases))
	slowHeaders(t, srv, p, r, &extraAcks)
	slowBodies(t, srv, newProject(t, pool, "slow-crowd"), p, r, &extraAcks)
	r.sent = wait(t, background)
	if status, _ := get(srv.url()+"/healthz", ""); status != http.StatusOK {
		t.Errorf("/healthz answered %d after the drill", status)
	}
	r.note("max RSS %.0f MiB", rss.max())
	verify(t, pool, p.ID, r, append(acks.acks(t), extraAcks.acks(t)...))
}

// postRaw sends one hand-made ingest request.
func postRaw(t *testing.T, base, key string, c badCase) (int, []byte) {
	t.Helper()
	var body io.Reader = bytes.NewReader(c.body)
	if c.chunked {
		body = oneByteReader{body}
	}
	req, err := http.NewRequest(http.MethodPost, base+"/v1/attempts", body)
	if err != nil {
		t.Fatal(err)
	}
	switch c.auth {
	case "":
		req.Header.Set("Authorization", "Bearer "+key)
	case "-":
	default:
		req.Header.Set("Authorization", c.auth)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	if c.encoding != "" {
		req.Header.Set("Content-Encoding", c.encoding)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

// probe measures, while slow clients hold connections, how long /healthz and a small ingest take.
type probe struct {
	healthSlowest, ingestSlowest time.Duration
	healthFailed, ingestOK       int
	ingestShed, ingestOther      int
}

func runProbe(t *testing.T, base string, p project, g *synth.Generator, until time.Time, acks io.Writer) probe {
	t.Helper()
	price, err := prices()
	if err != nil {
		t.Fatal(err)
	}
	var pr probe
	client := &http.Client{Timeout: 15 * time.Second}
	for time.Now().Before(until) {
		start := time.Now()
		status, _ := get(base+"/healthz", "")
		pr.healthSlowest = max(pr.healthSlowest, time.Since(start))
		if status != http.StatusOK {
			pr.healthFailed++
		}
		call := g.Call(time.Now())
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/attempts", bytes.NewReader(mustJSON(call)))
		req.Header.Set("Authorization", "Bearer "+p.Key)
		start = time.Now()
		resp, err := client.Do(req)
		pr.ingestSlowest = max(pr.ingestSlowest, time.Since(start))
		switch {
		case err != nil:
			pr.ingestOther++
		case resp.StatusCode == http.StatusOK:
			pr.ingestOK++
			for i := range call {
				_, _ = acks.Write(append(mustJSON(load.AckOf(&call[i], price)), '\n'))
			}
		case resp.StatusCode == http.StatusServiceUnavailable:
			pr.ingestShed++
		default:
			pr.ingestOther++
		}
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return pr
}

// slowHeaders opens connections that send their request headers a byte a second (slowloris).
// ledgerd must keep serving others and drop each such connection at its header timeout (10 s).
func slowHeaders(t *testing.T, srv *proc, p project, r *report, acks io.Writer) {
	n := pick(100, 500)
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatalf("slow headers: dial: %v", err)
		}
		conns = append(conns, c)
		_, _ = fmt.Fprintf(c, "POST /v1/attempts HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", srv.addr, p.Key)
	}
	start := time.Now()
	closed := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, 512)
			for time.Since(start) < 30*time.Second {
				if _, err := c.Write([]byte("X")); err != nil {
					closed[i] = time.Since(start)
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				if _, err := c.Read(buf); err != nil && !isTimeout(err) {
					closed[i] = time.Since(start)
					return
				}
			}
		}()
	}
	pr := runProbe(t, srv.url(), p, synth.New(synth.Options{Seed: 18}), start.Add(12*time.Second), acks)
	wg.Wait()
	var slowest time.Duration
	open := 0
	for _, d := range closed {
		if d == 0 {
			open++
		}
		slowest = max(slowest, d)
	}
	r.note("slow headers: %d connections sending a byte a second; ledgerd dropped them after at most %s (%d never dropped); meanwhile /healthz slowest %s, ingest %d ok / %d shed / %d failed, slowest %s",
		n, slowest.Round(100*time.Millisecond), open, pr.healthSlowest.Round(time.Millisecond), pr.ingestOK, pr.ingestShed, pr.ingestOther, pr.ingestSlowest.Round(time.Millisecond))
	if open > 0 || slowest > 12*time.Second {
		t.Errorf("slow headers: %d connections still open after 30s, slowest drop %s; want all dropped by the 10s header timeout", open, slowest)
	}
	if pr.healthFailed > 0 || pr.ingestShed+pr.ingestOther > 0 {
		t.Errorf("slow headers held the server: /healthz failed %d times, ingest refused %d and failed %d times", pr.healthFailed, pr.ingestShed, pr.ingestOther)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// slowBodies runs crowds of clients of one project (crowd) whose request bodies trickle in a byte
// every half second. A client that ledgerd answers (503 when the in-flight limit is reached) or
// cuts off dials again at once, so the crowd keeps its pressure. Ingest for another project (p)
// must be unaffected while the crowd stays within its project's share of the in-flight limit; over
// it, ledgerd must stay healthy and answer others quickly (503 with Retry-After is allowed: that is
// the limit doing its job, and the figures show it).
func slowBodies(t *testing.T, srv *proc, crowd, p project, r *report, acks io.Writer) {
	hold := pick(10*time.Second, 70*time.Second)
	for _, n := range []int{serverMaxInFlight / 2, serverMaxInFlight + 44} {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		answered := 0
		var firstAnswer time.Duration
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < hold {
					held := slowBody(srv.addr, crowd.Key, start, hold)
					if held == 0 {
						return
					}
					mu.Lock()
					answered++
					if firstAnswer == 0 || held < firstAnswer {
						firstAnswer = held
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Second)
		pr := runProbe(t, srv.url(), p, synth.New(synth.Options{Seed: int64(19 + n)}), start.Add(hold-time.Second), acks)
		wg.Wait()
		r.note("slow bodies: %d clients trickling a byte per 500ms for %s; ledgerd answered or cut %d of their requests (shortest hold %s); meanwhile /healthz slowest %s, ingest %d ok / %d shed 503 / %d failed, slowest %s",
			n, hold, answered, firstAnswer.Round(time.Millisecond), pr.healthSlowest.Round(time.Millisecond),
			pr.ingestOK, pr.ingestShed, pr.ingestOther, pr.ingestSlowest.Round(time.Millisecond))
		if pr.healthFailed > 0 || pr.ingestOther > 0 {
			t.Errorf("slow bodies (%d): /healthz failed %d times, ingest failed %d times", n, pr.healthFailed, pr.ingestOther)
		}
		if pr.healthSlowest >= time.Second || pr.ingestSlowest >= time.Second {
			t.Errorf("slow bodies (%d): /healthz took up to %s and ingest up to %s; want answers within a second",
				n, pr.healthSlowest, pr.ingestSlowest)
		}
		if n < serverMaxInFlight && pr.ingestShed > 0 {
			t.Errorf("slow bodies (%d, under the in-flight limit): ingest refused %d times", n, pr.ingestShed)
		}
		// Let ledgerd finish with the abandoned requests before the next round.
		time.Sleep(time.Second)
	}
}

// slowBody sends one ingest request whose body trickles in until ledgerd answers or closes the
// connection (it returns how long that took) or hold has passed since start (it returns 0).
func slowBody(addr, key string, start time.Time, hold time.Duration) time.Duration {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return time.Millisecond
	}
	defer c.Close()
	began := time.Now()
	_, _ = fmt.Fprintf(c, "POST /v1/attempts HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[", addr, key)
	buf := make([]byte, 512)
	for time.Since(start) < hold {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(buf); err == nil || !isTimeout(err) {
			return max(time.Since(began), time.Millisecond)
		}
		if _, err := c.Write([]byte(" ")); err != nil {
			return max(time.Since(began), time.Millisecond)
		}
	}
	return 0
}

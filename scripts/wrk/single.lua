-- wrk script for issue 2's one-record-a-request target: every request POSTs one new attempt record
-- (a unique attempt_id, started now) to /v1/attempts. scripts/ingest-load.sh runs it when BATCH is 1:
--   LEDGERD_KEY=... wrk -t2 -c64 -d30s -s scripts/wrk/single.lua http://127.0.0.1:8080 -- RATE THREADS
-- RATE 0 posts as fast as ledgerd acknowledges (each connection sends its next record when the last
-- is answered); RATE > 0 paces the whole run at RATE records/s (THREADS is wrk's -t), to read the
-- acknowledgement latency at a given load rather than at saturation.
--
-- wrk (C, one event loop a thread) costs less than half the CPU per request of a Go net/http
-- client (docs/performance.md), and the client shares the cores with ledgerd and PostgreSQL
-- here. Its calls are synth's default services with their primary models and weights (an
-- operation or two each, 6 tenants, 3% errors, most with a prompt hash and cache use, 5% for a
-- model without a price), so that a commit sums records of many series and prices them as
-- ledgerload's do.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } wrk_timespec;
int clock_gettime(int clk, wrk_timespec *ts);
]]

local calls = {
	-- weight, service, operation, provider, model, prompt_hash, input, output, cache_read,
	-- cache_write, batch: synth.DefaultServices' primaries and weights, the unpriced labs-agent included
	{ 15, "support-bot", "answer", "anthropic", "claude-sonnet-5-5", "support-system-v3", 1800, 350, 6000, 0, false },
	{ 15, "support-bot", "summarize-thread", "anthropic", "claude-sonnet-5-5", "support-system-v3", 1800, 350, 6000, 0, false },
	{ 35, "search-summarizer", "summarize", "anthropic", "claude-haiku-5-5", "search-summary-v7", 3000, 180, 2500, 0, false },
	{ 8, "code-review", "review-diff", "anthropic", "claude-sonnet-4-20250514", nil, 9000, 900, 0, 0, false },
	{ 15, "extractor", "extract-invoice", "openai", "gpt-4o", nil, 2200, 260, 1500, 0, false },
	{ 4, "digest-mailer", "weekly-digest", "anthropic", "claude-haiku-5-5", "digest-v2", 1200, 400, 0, 3000, false },
	{ 3, "nightly-eval", "grade", "anthropic", "claude-haiku-5-5", nil, 1500, 60, 0, 0, true },
	{ 5, "labs-agent", "plan", "acme", "acme-llm-2-preview", nil, 4000, 500, 0, 0, false },
}
local total_weight = 0
for _, c in ipairs(calls) do
	total_weight = total_weight + c[1]
end

-- pick returns a call at random, in proportion to its weight.
local function pick()
	local r = math.random(total_weight)
	for _, c in ipairs(calls) do
		r = r - c[1]
		if r <= 0 then
			return c
		end
	end
end

local tenants = { "acme", "wonka", "globex", "initech", "umbrella", "stark" }
local errors = { { 429, "rate_limited" }, { 529, "overloaded" }, { 500, "server_error" } }

-- setup runs in wrk's main Lua state, once per thread, and numbers the threads.
local threads = {}
function setup(thread)
	thread:set("tid", #threads)
	table.insert(threads, thread)
end

local run = tostring(os.time())
local n = 0
local headers
local interval -- ms between this thread's sends when paced
local due -- ms when this thread's next paced send is due

local ts = ffi.new("wrk_timespec")
local function now_ms()
	ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
	return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

function init(args)
	math.randomseed(os.time() * 100 + tid)
	local key = os.getenv("LEDGERD_KEY")
	if not key or key == "" then
		error("LEDGERD_KEY is not set")
	end
	headers = { ["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json" }
	local rate, nthreads = tonumber(args[1] or "0"), tonumber(args[2] or "1")
	if rate > 0 then
		interval = 1000 * nthreads / rate
	end
end

-- delay spaces this thread's sends interval apart on a fixed schedule: a slow answer delays
-- nothing but its own connection, and a thread that fell behind sends at once until it catches up.
function delay()
	if not interval then
		return 0
	end
	local t = now_ms()
	due = math.max(due or t, t - 1000) + interval
	return math.max(0, math.floor(due - t))
end

function request()
	n = n + 1
	local c = pick()
	local id = string.format("wrk-%s-%d-%d", run, tid, n)
	local status, extra = "ok", ""
	if math.random(100) <= 3 then
		local e = errors[math.random(#errors)]
		status = "error"
		extra = string.format(',"http_status":%d,"error_class":"%s"', e[1], e[2])
	else
		extra = string.format(',"http_status":200,"input_tokens":%d,"output_tokens":%d',
			c[7] + math.random(500), c[8] + math.random(200))
		if c[9] > 0 then
			extra = extra .. string.format(',"cache_read_tokens":%d', c[9])
		end
		if c[10] > 0 then
			extra = extra .. string.format(',"cache_write_tokens":%d', c[10])
		end
	end
	if c[6] then
		extra = extra .. string.format(',"prompt_hash":"%s"', c[6])
	end
	if c[11] then
		extra = extra .. ',"batch":true'
	end
	local body = string.format('{"attempt_id":"%s","request_id":"%s","attempt_no":1,"started_at":"%s",'
		.. '"latency_ms":%d,"provider":"%s","model":"%s","service":"%s","operation":"%s","tenant":"%s",'
		.. '"status":"%s","provider_request_id":"prq_%s"%s}',
		id, id, os.date("!%Y-%m-%dT%H:%M:%SZ"), 200 + math.random(6000), c[4], c[5], c[2], c[3],
		tenants[math.random(#tenants)], status, id, extra)
	return wrk.format("POST", "/v1/attempts", headers, body)
end

-- done prints the run in ledgerload's terms. Every 2xx is one committed record; anything else
-- (a 503 included) is counted as not acknowledged.
function done(summary, latency, requests)
	local bad = summary.errors.status + summary.errors.connect + summary.errors.read
		+ summary.errors.write + summary.errors.timeout
	local acked = summary.requests - summary.errors.status
	local secs = summary.duration / 1e6
	io.write(string.format("rate      %.0f acknowledged records/s over %.1fs (%d acknowledged, %d not: %d non-2xx, %d socket errors)\n",
		acked / secs, secs, acked, bad, summary.errors.status, bad - summary.errors.status))
	io.write(string.format("ack       p50 %.1fms  p95 %.1fms  p99 %.1fms  max %.1fms\n",
		latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
		latency.max / 1000))
end

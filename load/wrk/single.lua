-- wrk script for issue 2's one-record-a-request target: every request POSTs one new attempt record
-- (a unique attempt_id, started now) to /v1/attempts. scripts/ingest-load.sh runs it when BATCH is 1:
--   LEDGERD_KEY=... wrk -t2 -c64 -d30s -s load/wrk/single.lua http://127.0.0.1:8080 -- RATE THREADS
-- RATE 0 posts as fast as ledgerd acknowledges (each connection sends its next record when the last
-- is answered); RATE > 0 paces the whole run at RATE records/s (THREADS is wrk's -t), to read the
-- acknowledgement latency at a given load rather than at saturation.
--
-- wrk (C, one event loop a thread) costs less than half the CPU per request of a Go net/http
-- client (35 against 84 µs, perf), and the client shares the cores with ledgerd and PostgreSQL
-- here. Its services, models and tenants are a smaller set modeled on synth's default services
-- (6 calls, 6 tenants, 3% errors, most with a prompt hash and cache use), so that a commit sums
-- records of many series, as ledgerload's do.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } wrk_timespec;
int clock_gettime(int clk, wrk_timespec *ts);
]]

local calls = {
	-- service, operation, provider, model, prompt_hash, input, output, cache_read, cache_write
	{ "support-bot", "answer", "anthropic", "claude-sonnet-5-5", "support-system-v3", 1750, 400, 6000, 0 },
	{ "support-bot", "summarize-thread", "anthropic", "claude-sonnet-5-5", "support-system-v3", 1000, 280, 6000, 0 },
	{ "search-summarizer", "summarize", "anthropic", "claude-haiku-5-5", "search-summary-v7", 1750, 270, 2500, 0 },
	{ "search-summarizer", "rerank", "openai", "gpt-5-mini", nil, 900, 40, 0, 0 },
	{ "code-review", "review", "anthropic", "claude-opus-5", "review-rules-v2", 9000, 1200, 0, 12000 },
	{ "extractor", "extract", "google", "gemini-3-flash", nil, 3000, 500, 0, 0 },
}
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
	local c = calls[math.random(#calls)]
	local id = string.format("wrk-%s-%d-%d", run, tid, n)
	local status, extra = "ok", ""
	if math.random(100) <= 3 then
		local e = errors[math.random(#errors)]
		status = "error"
		extra = string.format(',"http_status":%d,"error_class":"%s"', e[1], e[2])
	else
		extra = string.format(',"http_status":200,"input_tokens":%d,"output_tokens":%d',
			c[6] + math.random(500), c[7] + math.random(200))
		if c[8] > 0 then
			extra = extra .. string.format(',"cache_read_tokens":%d', c[8])
		end
		if c[9] > 0 then
			extra = extra .. string.format(',"cache_write_tokens":%d', c[9])
		end
	end
	if c[5] then
		extra = extra .. string.format(',"prompt_hash":"%s"', c[5])
	end
	local body = string.format('{"attempt_id":"%s","request_id":"%s","attempt_no":1,"started_at":"%s",'
		.. '"latency_ms":%d,"provider":"%s","model":"%s","service":"%s","operation":"%s","tenant":"%s",'
		.. '"status":"%s","provider_request_id":"prq_%s"%s}',
		id, id, os.date("!%Y-%m-%dT%H:%M:%SZ"), 200 + math.random(6000), c[3], c[4], c[1], c[2],
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

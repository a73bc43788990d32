#!/usr/bin/env bash
# Load test: builds the release binary, starts it (no Redis: the embedded book), and runs
# wrk with 64 connections against /livez and the estimate endpoints (each with a repeated
# and with a distinct plan per request), one after the other on the same server; prints
# requests/s, p50 and p99 latency, and each run's throughput as a ratio of /livez's, with the
# server's CPU time per request (user + system, from /proc, at the clock tick's 10 ms
# resolution over the run) and /livez's as a ratio of it. Then
# compares one in-process memory estimate with the Python llm-analysis package on the same
# configuration, if it installs, and restarts Redis under load.
#   scripts/load.sh                 10 s per run, 3 rounds
#   DURATION=30s ROUNDS=5 scripts/load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed (Debian: apt-get install wrk)" >&2; exit 1; }
cargo build --release --locked --quiet
# The server and wrk on separate CPUs (the first half and the rest) where taskset can pin
# them, so the load generator does not take the server's cores; otherwise both float.
cpus="$(nproc)"
if command -v taskset >/dev/null && [ "$cpus" -ge 2 ]; then
    half=$((cpus / 2))
    server_pin=(taskset -c "0-$((half - 1))")
    client_pin=(taskset -c "$half-$((cpus - 1))")
    client_threads=$((cpus - half))
else
    server_pin=()
    client_pin=()
    client_threads=2
fi
echo "server on ${server_pin[*]:-any CPU}, wrk (${client_threads} threads) on ${client_pin[*]:-any CPU}, of $cpus CPUs"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
TRAINPLAN_LISTEN="127.0.0.1:$port" TRAINPLAN_LOG_LEVEL=warn "${server_pin[@]}" "${CARGO_TARGET_DIR:-target}/release/trainplan" serve &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$scratch"/*.lua; rmdir "$scratch" 2>/dev/null || true' EXIT
scratch="$(mktemp -d)"
for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
done
base="http://127.0.0.1:$port"
# Each estimate endpoint three ways: "repeat" sends the same plan every time (a CI gate
# re-run, a spreadsheet cell refreshing one URL: after the first, answered from the answer
# cache), "repeat-gzip" the same with "Accept-Encoding: gzip, deflate" (what Python's
# requests and httpx send: the kept answer's gzip copy), "distinct" a new plan on every
# request (every request estimated; the varied number does not change the work). All
# build each request in Lua the same way, so wrk's own cost is the same in each.
script() { # file, body with @N@ for the number, base number, vary (1) or not (0), gzip (1) or not (0), round
    cat >"$1" <<LUA
local template, base, vary, gzip, round = [[$2]], $3, $4, $5, ${6:-0}
local headers = { ["Content-Type"] = "application/json" }
if gzip == 1 then headers["Accept-Encoding"] = "gzip, deflate" end
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
local counter = 0
function request()
    counter = counter + 1
    local n = base
    if vary == 1 then n = base + (round * 100 + id) * 10000000 + counter end
    local body = template:gsub("@N@", string.format("%d", n))
    return wrk.format("POST", nil, headers, body)
end
LUA
}
endpoints=(
    'memory|/v1/estimates/memory|{"model": "llama-3.1-8b", "method": "lora", "lora": {"alpha": @N@}, "gpu": "a100-80gb", "parallelism": {"gpus": 2}}|16'
    'cost|/v1/estimates/cost|{"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb", "parallelism": {"gpus": 2}, "workload": {"tokens": @N@}}|200000000'
    'recommend|/v1/recommendations|{"model": "llama-2-7b", "dataset": {"samples": @N@}, "quality": "balanced"}|20000'
)

# The server's CPU time so far (user + system) in clock ticks, from /proc.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
ticks_per_second="$(getconf CLK_TCK)"
run() { # name, path, [script]
    local args=(-t "$client_threads" -c 64 -d "${DURATION:-10s}" --latency)
    [ -n "${3:-}" ] && args+=(-s "$3")
    local before output
    before="$(server_ticks)"
    output="$("${client_pin[@]}" wrk "${args[@]}" "$base$2")"
    echo "$output" | awk -v name="$1" -v ticks="$(($(server_ticks) - before))" -v hz="$ticks_per_second" '
        /requests in/ { requests = $1 }
        /Requests\/sec/ { rps = $2 }
        / 50%/ { p50 = $2 }
        / 99%/ { p99 = $2 }
        /Non-2xx/ { bad = $NF }
        END { printf "%s %s %s %s %s %.2f\n", name, rps, p50, p99, bad + 0, ticks / hz * 1e6 / requests }'
}
for endpoint in "${endpoints[@]}"; do
    IFS='|' read -r name path body number <<<"$endpoint"
    script "$scratch/$name-repeat.lua" "$body" "$number" 0 0
    script "$scratch/$name-repeat-gzip.lua" "$body" "$number" 0 1
done
# ROUNDS passes over every run, in turn, so that a slow moment of a shared machine lands
# on one pass of everything rather than on one endpoint; the table gives each run's median.
# Each round's distinct plans are new to the server: a plan it saw in an earlier round
# would be a repeat, and kept.
results="$(
    for round in $(seq 1 "${ROUNDS:-3}"); do
        run livez /livez
        for endpoint in "${endpoints[@]}"; do
            IFS='|' read -r name path body number <<<"$endpoint"
            script "$scratch/$name-distinct.lua" "$body" "$number" 1 0 "$round"
            for workload in repeat repeat-gzip distinct; do
                run "$name/$workload" "$path" "$scratch/$name-$workload.lua"
            done
        done
    done
)"
echo
echo "$results" | python3 -c '
import statistics, sys
def ms(text):
    for unit, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
runs, failed = {}, False
for line in sys.stdin:
    name, rps, p50, p99, bad, cpu = line.split()
    runs.setdefault(name, []).append((float(rps), ms(p50), ms(p99), float(cpu)))
    if int(bad) > 0:
        failed = True
        print(f"{name}: {bad} non-2xx answers")
median = {name: [statistics.median(v) for v in zip(*rows)] for name, rows in runs.items()}
base, base_cpu = median["livez"][0], median["livez"][3]
print("{:<20} {:>12} {:>8} {:>8} {:>10} {:>14} {:>14}   (median of {} rounds)".format(
    "run", "requests/s", "p50 ms", "p99 ms", "vs /livez", "server us/req", "cpu vs /livez", len(runs["livez"])))
for name, (rps, p50, p99, cpu) in median.items():
    print(f"{name:<20} {rps:>12.0f} {p50:>8.2f} {p99:>8.2f} {rps / base:>9.2f}x {cpu:>14.1f} {base_cpu / cpu:>13.2f}x")
sys.exit(1 if failed else 0)
'
hits="$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$base/metrics" | awk '/^answer_cache_requests_total/ { printf "%s ", $0 }')"
echo "answer cache: ${hits:-no counters}"

# One in-process memory estimate against llm-analysis (PyPI), same configuration.
echo
venv="${CARGO_TARGET_DIR:-target}/llm-analysis-venv"
if [ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet llm-analysis; } 2>/dev/null; then
    ours="$(cargo bench --bench estimate -- --warm-up-time 1 --measurement-time 3 'llm-analysis config' 2>/dev/null | awk '/time:/ && !done { print $4, $5; done = 1 }')"
    theirs="$("$venv/bin/python" - <<'PY' 2>/dev/null || true
import logging, timeit
logging.disable(logging.CRITICAL)
from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
model = get_model_config_by_name("upstage_Llama-2-70b-instruct-v2")
gpu = get_gpu_config_by_name("a100-sxm-80gb")
dtype = get_dtype_config_by_name("w16a16e16")
def once():
    analysis = LLMAnalysis(model, gpu, dtype, ParallelismConfig(dp_size=32))
    analysis.training(batch_size_per_gpu=1, seq_len=2048, ds_zero=DSZeRO.STAGE_3,
                      activation_recomputation=ActivationRecomputation.FULL, mlp_gated_linear_units=True)
n = 50
print(f"{timeit.timeit(once, number=n) / n * 1e6:.1f} µs")
PY
)"
    echo "one memory estimate: trainplan ${ours:-?} (criterion), llm-analysis ${theirs:-unavailable} (timeit); Llama-2-70B, full fine-tuning, ZeRO-3 over 32 A100 80GB, 1 × 2,048, full recompute"
else
    echo "llm-analysis could not be installed; comparison skipped"
fi

# Redis restarted under load: a second server on a throwaway Redis, wrk on the cost
# endpoint while Redis is killed and started again; every request must still succeed.
if command -v redis-server >/dev/null; then
    redis_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    start_redis() { redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 & redis_pid=$!; }
    start_redis
    live_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    TRAINPLAN_LISTEN="127.0.0.1:$live_port" TRAINPLAN_LOG_LEVEL=error TRAINPLAN_POLL_INTERVAL_SECONDS=1 \
        TRAINPLAN_REDIS_URL="redis://127.0.0.1:$redis_port" "${server_pin[@]}" "${CARGO_TARGET_DIR:-target}/release/trainplan" serve &
    live_pid=$!
    trap 'kill "$pid" "$live_pid" "$redis_pid" 2>/dev/null || true; rm -f "$scratch"/*.lua; rmdir "$scratch" 2>/dev/null || true' EXIT
    sleep 1
    ( sleep 3; kill "$redis_pid"; sleep 3; start_redis ) &
    outage="$("${client_pin[@]}" wrk -t "$client_threads" -c 64 -d 10s -s "$scratch/cost-distinct.lua" "http://127.0.0.1:$live_port/v1/estimates/cost")"
    requests="$(echo "$outage" | awk '/requests in/ { print $1 }')"
    failed="$(echo "$outage" | awk '/Non-2xx/ { print $NF }')"
    errors="$(echo "$outage" | awk '/Socket errors/ { print }')"
    echo
    echo "Redis killed at 3 s and restarted at 6 s of 10 s: $requests requests, ${failed:-0} non-2xx, ${errors:-no socket errors}"
    [ -z "$failed" ] && [ -z "$errors" ] || exit 1
fi

#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, the OpenAPI sync check and every
# test (unit, property, parser, integration through the real HTTP stack with a real
# Redis, CLI, accuracy reports).
#
# Redis: TRAINPLAN_TEST_REDIS_URL when set (the tests only touch keys under their own
# random prefixes and never flush it); otherwise a throwaway redis-server on a free port,
# stopped on exit (Debian's redis-server package is installed first if it is missing and
# apt-get can). The tests that stop and restart Redis start their own instance from the
# same binary (TRAINPLAN_TEST_REDIS_SERVER).
set -euo pipefail
cd "$(dirname "$0")/.."

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for_port() { # port: until something listens there (at most 10 s)
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get install -y --no-install-recommends redis-server >/dev/null \
            || { apt-get update >/dev/null && apt-get install -y --no-install-recommends redis-server >/dev/null; }
    fi
fi
command -v redis-server >/dev/null 2>&1 || { echo "redis-server is needed for the tests" >&2; exit 1; }
export TRAINPLAN_TEST_REDIS_SERVER="$(command -v redis-server)"

if [ -z "${TRAINPLAN_TEST_REDIS_URL:-}" ]; then
    port="$(free_port)"
    redis_dir="$(mktemp -d)"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$redis_dir" --daemonize no >"$redis_dir/log" 2>&1 &
    redis_pid=$!
    trap 'kill "$redis_pid" 2>/dev/null || true; rm -rf "$redis_dir"' EXIT
    wait_for_port "$port"
    export TRAINPLAN_TEST_REDIS_URL="redis://127.0.0.1:$port"
fi

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked

# Contract fuzzing: schemathesis (PyPI, in a virtual environment under target/) against
# a live server on loopback, using the committed spec, every operation, a fixed seed and
# bounded examples. Fails on any 5xx, any response that violates the schema, any
# undocumented status code, content type or header, and any request outside the schema
# (a value past a stated bound, an unknown enum value) that is not refused with a 4xx.
# Two checks are left out, by design: positive_data_acceptance (a request the schema
# allows may still be refused: an unknown catalog id, kv_heads that do not divide heads,
# a LoRA field without method lora) and missing_required_header (with no admin token
# configured, refresh over HTTP is disabled: 403, which no credentials would change,
# rather than 401).
venv="${CARGO_TARGET_DIR:-target}/schemathesis-venv"
if [ ! -x "$venv/bin/schemathesis" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "schemathesis==4.32.5"
fi
cargo build --locked --quiet
api_port="$(free_port)"
TRAINPLAN_LISTEN="127.0.0.1:$api_port" TRAINPLAN_LOG_LEVEL=warn "${CARGO_TARGET_DIR:-target}/debug/trainplan" serve &
api_pid=$!
trap 'kill "$api_pid" 2>/dev/null || true; kill "${redis_pid:-}" 2>/dev/null || true; rm -rf "${redis_dir:-/nonexistent}"' EXIT
wait_for_port "$api_port"
"$venv/bin/schemathesis" run openapi/openapi.json --url "http://127.0.0.1:$api_port" \
    --seed 42 --max-examples 20 \
    --checks all --exclude-checks positive_data_acceptance,missing_required_header

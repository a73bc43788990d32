#!/usr/bin/env bash
# A long fuzzing pass over the parsers (Hugging Face configs, every feed, the query-string
# decoder): the proptest targets in tests/api/fuzz.rs with many more cases than the test
# command's short pass, each bounded in time.
#   scripts/fuzz.sh              100,000 cases per target, at most 10 minutes
#   CASES=1000000 MINUTES=60 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES="${CASES:-100000}"
timeout "$(( ${MINUTES:-10} * 60 ))" cargo test --release --locked --test api fuzz:: -- --test-threads 1

#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, the OpenAPI sync check and every
# test (unit, property, integration through the real HTTP stack, CLI, accuracy reports).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked

#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: formatting, lints, unit, table, property
# and end-to-end tests. Installs whatever the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
    # nextest does not run doc tests.
    cargo test --workspace --doc --locked
else
    cargo test --workspace --locked --no-fail-fast
fi

#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: formatting, lints, unit, table, property
# and end-to-end tests, then kubesim's acceptance tests through kubectl 1.37, the Python
# kubernetes client and the Helm engine, and the dashboard's tests in headless Chromium. Installs
# what the tests need first: a project-local virtualenv in .venv from
# tests/acceptance/requirements.txt, Debian's chromium and chromium-driver, and Debian's prometheus
# (its promtool tests the chart's alerts; the tests start their own prometheus on loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
# A test run builds each crate once; incremental artefacts would only take disk (about 3 GiB
# from a fresh clone, a third of the build), and CI ran out of it once.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== python clients (.venv)"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --disable-pip-version-check -q -r tests/acceptance/requirements.txt

echo "== browser for the dashboard's tests (Debian's chromium and chromium-driver)"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi

echo "== Prometheus for the alert and dashboard tests (Debian's prometheus, with promtool)"
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== rust tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
    # nextest does not run doc tests.
    cargo test --workspace --doc --locked
else
    cargo test --workspace --locked --no-fail-fast
fi

echo "== container image (built from the dev binaries, and run from its own root filesystem)"
bash scripts/image.sh --profile dev

echo "== acceptance: kubesim through kubectl, the Python client and Helm; the dashboard in Chromium; the alerts under promtool and a real Prometheus"
cargo build --locked -p kubesim -p kubectl-express -p express-operator

echo "== fleet benchmark, smoke run: 2 tenants on the debug binaries (figures: docs/benchmarks.md)"
cargo test --locked -p express-operator --bench fleet -- --tenants 2 \
    --kubesim "$target_dir/debug/kubesim" --operator "$target_dir/debug/express-operator" \
    --timeout-seconds 300
KUBESIM_BIN="$target_dir/debug/kubesim" \
KUBECTL_EXPRESS_BIN="$target_dir/debug/kubectl-express" \
EXPRESS_OPERATOR_BIN="$target_dir/debug/express-operator" \
    .venv/bin/python -m pytest -q tests/acceptance

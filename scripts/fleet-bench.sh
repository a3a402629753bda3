#!/usr/bin/env bash
# The fleet benchmark (docs/benchmarks.md): builds kubesim and the operator for release, then
# runs them in processes of their own and measures the operator. Flags go to the benchmark,
# e.g. `scripts/fleet-bench.sh --tenants 100` for a quick run; `--help` lists them all.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p kubesim -p express-operator
exec cargo bench --locked -p express-operator --bench fleet -- "$@"

#!/usr/bin/env bash
# One acceptance test at full size, on release builds: what scripts/chaos.sh and
# scripts/notify-flood.sh share.
#
#   scripts/acceptance-on-release-builds.sh PYTEST-ARGS...
#
# Builds the operator, kubesim and the plugin with the release profile, makes sure .venv has the
# acceptance tests' Python packages, and runs pytest with PYTEST-ARGS against those binaries.
# The test's size comes from the environment the caller sets (EXPRESS_CHAOS_*, EXPRESS_FLOOD_*).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release --locked -p express-operator -p kubesim -p kubectl-express
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --disable-pip-version-check -q -r tests/acceptance/requirements.txt
KUBESIM_BIN="$target_dir/release/kubesim" \
KUBECTL_EXPRESS_BIN="$target_dir/release/kubectl-express" \
EXPRESS_OPERATOR_BIN="$target_dir/release/express-operator" \
    exec .venv/bin/python -m pytest -q -s "$@"

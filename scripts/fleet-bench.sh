#!/usr/bin/env bash
# The fleet benchmark (docs/benchmarks.md): builds kubesim and the operator for release, then
# runs them in processes of their own and measures the operator. Flags go to the benchmark,
# e.g. `scripts/fleet-bench.sh --tenants 100` for a quick run; `--help` lists them all. Its own:
#
#   --substrate kubesim   (default) on kubesim, the operator's limits raised out of the way
#                         unless --chart-defaults
#   --substrate real      on Kubernetes' own control plane (scripts/real-cluster.sh up, in a
#                         directory of its own, stopped after), the operator as the chart runs
#                         it: the chart's ServiceAccount, RBAC, API Priority and Fairness level
#                         and every flag its Deployment passes at the default values
#   --substrate both      kubesim then the real control plane, both at the chart's defaults:
#                         the two columns of docs/benchmarks.md's first table
#   --chart-defaults      on kubesim, the operator with the chart's flags too
set -euo pipefail
cd "$(dirname "$0")/.."
substrate=kubesim
chart=false
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
    --substrate) substrate="${2:?--substrate kubesim|real|both}"; shift 2 ;;
    --substrate=*) substrate="${1#*=}"; shift ;;
    --chart-defaults) chart=true; shift ;;
    *) pass+=("$1"); shift ;;
    esac
done
case "$substrate" in
kubesim) ;;
real | both) chart=true ;;
*) echo "fleet-bench: --substrate is kubesim, real or both, not $substrate" >&2; exit 2 ;;
esac

cargo build --release --locked -p kubesim -p express-operator -p kubectl-express
bench() { cargo bench --locked -p express-operator --bench fleet -- "$@"; }

if [ "$chart" = false ]; then
    bench "${pass[@]}"
    exit
fi

# The chart is rendered by the real Helm engine, from the test command's virtualenv.
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --disable-pip-version-check -q -r tests/acceptance/requirements.txt
work=$(mktemp -d)
cleanup() {
    [ -f "$work/cluster/pids" ] && bash scripts/real-cluster.sh down "$work/cluster"
    rm -rf "$work"
}
trap cleanup EXIT
.venv/bin/python scripts/chart-operator.py args >"$work/chart-args"
echo "fleet-bench: the operator's flags, as the chart passes them: $(tr '\n' ' ' <"$work/chart-args")" >&2

if [ "$substrate" != real ]; then
    bench --chart-args "$work/chart-args" "${pass[@]}"
fi
if [ "$substrate" != kubesim ]; then
    bash scripts/real-cluster.sh up "$work/cluster"
    .venv/bin/python scripts/chart-operator.py account "$work/cluster" >/dev/null
    bench --substrate real --cluster "$work/cluster" --chart-args "$work/chart-args" "${pass[@]}"
fi

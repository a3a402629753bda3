#!/usr/bin/env bash
# The release analysis on live builds, measured (docs/benchmarks.md, "The release analysis on
# live builds"): the acceptance scenario with tenant traffic (tests/acceptance/test_release_analysis.py)
# run FAULTY_RUNS times for the four faulty builds and HEALTHY_RUNS times for the healthy one,
# every second run with the other core kept busy by a spinning shell. Prints one line a run.
#
#   bash scripts/analysis-runs.sh [FAULTY_RUNS] [HEALTHY_RUNS]     (default 5 and 20)
#
# Needs what the README's test command installs (.venv, Prometheus) and the debug binaries
# (cargo build -p kubesim -p kubectl-express -p express-operator).
set -u
faulty_runs=${1:-5}
healthy_runs=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/tests/acceptance"
python=../../.venv/bin/python
busy=
load=quiet
# Every even run keeps one core busy (a spinning shell, its output nowhere).
load_for() {
  if [ $(($1 % 2)) -eq 0 ]; then
    (while :; do :; done) >/dev/null 2>&1 &
    busy=$!
    load=busy
  else
    load=quiet
  fi
}
settle() {
  if [ -n "$busy" ]; then kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null; fi
  busy=
}
trap settle EXIT
for i in $(seq 1 "$faulty_runs"); do
  load_for "$i"
  timeout 900 "$python" -m pytest -q test_release_analysis.py -k misbehaving -p no:cacheprovider 2>&1 \
    | tail -1 | sed "s/^/faulty builds, run $i ($load): /"
  settle
done
for i in $(seq 1 "$healthy_runs"); do
  load_for "$i"
  timeout 600 "$python" -m pytest -q test_release_analysis.py -k healthy -p no:cacheprovider 2>&1 \
    | tail -1 | sed "s/^/healthy build, run $i ($load): /"
  settle
done

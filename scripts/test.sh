#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: formatting, lints, unit, table, property
# and end-to-end tests, then kubesim's acceptance tests through kubectl 1.37, the Python
# kubernetes client and the Helm engine, the core scenarios again on Kubernetes' own control plane
# (etcd, Kubernetes 1.37 and kwok built from their Go modules by scripts/real-cluster.sh), and the
# dashboard's tests in headless Chromium. Installs
# what the tests need first: a project-local virtualenv in .venv from
# tests/acceptance/requirements.txt, Debian's chromium and chromium-driver, and Debian's prometheus
# (its promtool tests the chart's alerts; the tests start their own prometheus on loopback) and
# prometheus-alertmanager (the notification tests' Alertmanager, on loopback too).
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
# A test run builds each crate once; incremental artefacts would only take disk (about 3 GiB
# from a fresh clone, a third of the build), and CI ran out of it once.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Each phase says how long it took, and the run ends with every phase's time and the total, so
# the suite's cost is visible in every CI log (keep the whole under 30 minutes on 2 cores).
suite_started=$SECONDS
phase_name=""
phase_started=$SECONDS
phase_times=()
phase() {
    end_phase
    phase_name="$1"
    phase_started=$SECONDS
    echo "== $1"
}
end_phase() {
    if [ -n "$phase_name" ]; then
        local took=$((SECONDS - phase_started))
        phase_times+=("$(printf '%5ds  %s' "$took" "$phase_name")")
        echo "-- ${took}s: $phase_name"
    fi
    phase_name=""
}
report_times() {
    local status=$?
    end_phase
    if [ -n "${go_build:-}" ] && kill -0 "$go_build" 2>/dev/null; then
        kill -TERM -- "-$go_build" 2>/dev/null || true
    fi
    echo "== phase times"
    printf '%s\n' "${phase_times[@]}"
    if [ -f "${go_build_log:-}" ]; then
        echo "   (beside them) the real control plane's Go build: $(tail -n 1 "$go_build_log")"
    fi
    printf '%5ds  total (exit %d)\n' "$((SECONDS - suite_started))" "$status"
}
trap report_times EXIT
# Interrupted, the times are still printed, with the status of an interruption.
trap 'exit 130' INT
trap 'exit 143' TERM

# The control plane's Go build (10 minutes and more with empty Go caches, seconds after) runs
# beside the phases below at the lowest priority: it takes the cores while the Rust tests and the
# kubesim acceptance tests wait on timers. The real-substrate tests run last and wait for it
# (scripts/real-cluster.sh builds under a lock); its log is printed with the phase times.
go_build_log="$target_dir/real-cluster/build.log"
mkdir -p "$target_dir/real-cluster"
# (A session of its own, so that an early exit stops the whole build: go and its compilers.)
# Where the kernel groups processes by session for scheduling (autogroup), a new session is a
# group of its own with an equal share whatever its processes' nice values, so the build lowers
# its group's too, from inside the new session.
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 bash scripts/real-cluster.sh build' \
    >"$go_build_log" 2>&1 &
go_build=$!

phase "python clients (.venv)"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --disable-pip-version-check -q -r tests/acceptance/requirements.txt

phase "browser for the dashboard's tests (Debian's chromium and chromium-driver)"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi

phase "Prometheus for the alert and dashboard tests (Debian's prometheus, with promtool)"
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi

phase "Alertmanager for the notification tests (Debian's prometheus-alertmanager)"
if ! command -v prometheus-alertmanager >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-alertmanager >/dev/null
fi

phase "HAProxy for the chaos test's front of two API servers (Debian's haproxy)"
if ! command -v haproxy >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
fi

phase "cargo fmt --check"
cargo fmt --all --check

phase "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The binaries as shipped (the operator without `dev`, with jemalloc: scripts/image.sh) resolve
# other features than the workspace's: checked here, the image below is made from the tests'.
cargo clippy --locked -p express-operator -p kubectl-express --no-default-features \
    --features express-operator/jemalloc -- -D warnings

phase "rust tests"
# The test binaries three at a time (the end-to-end ones mostly wait on timers), then the doc
# tests: 159 s two at a time, 116 s three, 101 s four (docs/benchmarks.md, "Four units at a time").
python3 scripts/rust-tests.py --jobs 3 --workspace --locked
cargo test --workspace --doc --locked

phase "debug binaries for the benchmark smoke run and the acceptance tests (the test build's)"
# The test build above already linked kubesim, kubectl-express and express-operator (their own
# integration tests run them), with the features the tests unify; `cargo build -p` would choose
# other features and build them, and many dependencies, a second time. This only makes sure
# they are there, as that build left them.
cargo test --workspace --locked --no-run --quiet
for binary in kubesim kubectl-express express-operator; do
    [ -x "$target_dir/debug/$binary" ] || { echo "test.sh: the test build left no $binary" >&2; exit 1; }
done

phase "container image (the test build's binaries, run from the image's own root filesystem)"
# From the binaries the tests ran: building the shipped features' binaries here compiled about
# 200 crates a second time (107 to 201 s; docs/benchmarks.md).
bash scripts/image.sh --from-test-build

phase "fleet benchmark, smoke run: 2 tenants on the debug binaries (figures: docs/benchmarks.md)"
# --workspace: the features the tests' build chose, so that no dependency is built again; fast
# pods and short rests: the smoke run shows the benchmark runs, the figures come from release
# builds (docs/benchmarks.md).
cargo test --workspace --locked --bench fleet -- --tenants 2 \
    --kubesim "$target_dir/debug/kubesim" --operator "$target_dir/debug/express-operator" \
    --startup-seconds 0.2 --terminate-seconds 0.2 --rest-seconds 1 --timeout-seconds 300

phase "acceptance: kubesim and the real control plane through kubectl, the Python client and Helm; the dashboard in Chromium; the alerts under promtool and a real Prometheus"
KUBESIM_BIN="$target_dir/debug/kubesim" \
KUBECTL_EXPRESS_BIN="$target_dir/debug/kubectl-express" \
EXPRESS_OPERATOR_BIN="$target_dir/debug/express-operator" \
    .venv/bin/python -m pytest -q -n 4 --dist loadfile --no-loadscope-reorder --durations 25 tests/acceptance
# (--durations: the 25 slowest tests, where the phase's time goes.)
# Four units at a time on two cores: the tests mostly wait on timers and on the operator; two at
# a time kept the machine about a third busy and took 1,090 s, four keep it about 60 % busy and
# took 646 s, every test passing (docs/benchmarks.md, "Four units at a time").
# The real-substrate tests passed, so the build did; this reaps it.
wait "$go_build" || { cat "$go_build_log" >&2; exit 1; }

#!/usr/bin/env bash
# The chaos scenario's full form (DESIGN section 19); its short form runs in the test command.
#
#   scripts/chaos.sh [--tenants N] [--minutes M] [--settle-seconds S] [--substrate real|kubesim]
#
# Kubernetes' own control plane, highly available (two API servers behind a front, compacting
# etcd every 5 s), two operator replicas (release builds) with the chart's RBAC, N tenants of five
# nodes (default 200) upgraded fleet-wide again and again while the faults of
# tests/acceptance/test_chaos.py go round for M minutes (default 15): one API server late by 2 s,
# an API server killed, every connection cut, etcd killed, the leading replica killed; meanwhile
# an OperatorRelease moves every tenant to ring canary (a third replica). Passes when every
# tenant converged within S seconds of the last fault (default 900), the recorder found every
# node replaced once per upgrade, after its prerequisites, within maxConcurrent, and the release
# succeeded with no sample failed. `--substrate kubesim` throws the same faults in kubesim's
# shapes instead (what each fault cost there, beside the real control plane's). The
# line starting "chaos:" is the run's summary (docs/benchmarks.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tenants=200
minutes=15
settle=900
substrate=real
while [ $# -gt 0 ]; do
    case "$1" in
    --tenants) tenants="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --settle-seconds) settle="$2"; shift 2 ;;
    --substrate) substrate="$2"; shift 2 ;;
    *)
        echo "usage: $0 [--tenants N] [--minutes M] [--settle-seconds S] [--substrate real|kubesim]" >&2
        exit 2
        ;;
    esac
done
EXPRESS_CHAOS_TENANTS="$tenants" \
EXPRESS_CHAOS_FAULT_SECONDS="$((minutes * 60))" \
EXPRESS_CHAOS_SETTLE_SECONDS="$settle" \
EXPRESS_CHAOS_SUBSTRATE="$substrate" \
    exec bash scripts/acceptance-on-release-builds.sh tests/acceptance/test_chaos.py

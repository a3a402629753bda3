#!/usr/bin/env bash
# The notifications flood at full size (DESIGN section 21); a small form runs in the test command.
#
#   scripts/notify-flood.sh [--tenants N] [--group-seconds G]
#
# kubesim and the operator (release builds), a webhook destination with the chart's default
# window (G, default 60 s), N tenants (default 1,000) provisioned in one multi-document kubectl
# apply, then broken in another (a version whose pods crash). Passes when every tenant's failure
# was told exactly once, in one message at once and at most one grouped message per window
# after. The line starting "flood:" is the run's summary (docs/benchmarks.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tenants=1000
group=60
while [ $# -gt 0 ]; do
    case "$1" in
    --tenants) tenants="$2"; shift 2 ;;
    --group-seconds) group="$2"; shift 2 ;;
    *)
        echo "usage: $0 [--tenants N] [--group-seconds G]" >&2
        exit 2
        ;;
    esac
done
EXPRESS_FLOOD_TENANTS="$tenants" \
EXPRESS_FLOOD_GROUP_SECONDS="$group" \
    exec bash scripts/acceptance-on-release-builds.sh tests/acceptance/test_notifications.py -k flood

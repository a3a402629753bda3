#!/usr/bin/env python3
"""Healthy releases with analysis in a row, each on a fresh DC (kubesim, ring default and ring
canary on the same build, four tenants with one pinned to default, a real Prometheus scraping
both, a trickle of changes): each must succeed with every signal ok or quiet and no failed
sample. Not part of the suite (a few minutes); the note of DESIGN section 16 reports its output.

    KUBESIM_BIN=... EXPRESS_OPERATOR_BIN=... KUBECTL_EXPRESS_BIN=... \\
      timeout 1200 .venv/bin/python scripts/analysis-healthy-runs.py [RUNS]
"""

import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "acceptance"))

import test_release_analysis as analysis  # noqa: E402
from conftest import eventually  # noqa: E402


def one_run(index):
    dc = analysis.Dc.ready(pathlib.Path(tempfile.mkdtemp(prefix=f"analysis-run-{index}-")))
    try:
        started = time.time()
        dc.release("healthy", bake=36)
        eventually(lambda: dc.status("healthy").get("phase") in ("Succeeded", "RolledBack"), timeout=180,
                   what="the release over")
        status = dc.status("healthy")
        verdicts = {s["signal"]: s["verdict"] for s in status.get("analysis", {}).get("signals", [])}
        analysed = len(status.get("analysis", {}).get("history", []))
        print(f"run {index}: {status['phase']} in {time.time() - started:.0f}s, samples {status['samples']}, "
              f"{analysed} analysed, last signals {verdicts}", flush=True)
        return status["phase"] == "Succeeded" and status["samples"]["failed"] == 0
    finally:
        dc.close()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results = [one_run(i + 1) for i in range(runs)]
    print(f"{sum(results)} of {runs} healthy releases succeeded with no failed sample")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()

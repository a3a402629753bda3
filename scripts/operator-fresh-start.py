#!/usr/bin/env python3
"""What a fresh operator costs to start on a DC already up (issue 63): its watches filled by
paged lists against streaming lists (`--streaming-lists`).

    .venv/bin/python scripts/operator-fresh-start.py --attach KUBECONFIG [--runs 3]
        [--binary target/release/express-operator]

Starts `express-operator run --leader-elect` against the kubesim the kubeconfig names (a DC a
benchmark keeps up with `--hold`, whose own operator holds the ring's Lease: this one fills
its caches and waits, as a standby replica or a restarted operator does before it leads), each
way in turn, `--runs` times. For each: seconds until `/readyz` answers (every cache listed),
its CPU until then, its peak RSS 10 s after, and the API requests it sent by verb (kubesim's
counters for the operator's User-Agent, which the DC's own operator shares: at rest it sends
no list). Not part of the tests."""

import argparse
import json
import os
import pathlib
import re
import socket
import statistics
import subprocess
import time
import urllib.request

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    hwm = 0.0
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def operator_requests(server):
    """Requests by verb so far from every operator process (User-Agent express-operator/...)."""
    with urllib.request.urlopen(f"{server}/kubesim/counters/agents", timeout=30) as response:
        agents = json.loads(response.read())
    verbs = {}
    for agent, calls in agents.items():
        if agent.startswith("express-operator"):
            for call, n in calls.items():
                verb = call.split()[0]
                verbs[verb] = verbs.get(verb, 0) + n
    return verbs


def one_start(binary, kubeconfig, server, streaming):
    port = free_port()
    argv = [str(binary), "run", "--leader-elect", "--metrics-addr", f"127.0.0.1:{port}",
            "--operator-namespace", "express-system", "--concurrency", "64",
            "--kube-qps", "5000", "--kube-burst", "5000"]
    if streaming:
        argv.append("--streaming-lists")
    before = operator_requests(server)
    begin = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "KUBECONFIG": str(kubeconfig),
                                    "RUST_LOG": "warn"})
    try:
        while True:
            assert process.poll() is None, "the operator exited"
            assert time.perf_counter() - begin < 300, "never ready"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.05)
        ready = time.perf_counter() - begin
        cpu, _ = proc(process.pid)
        time.sleep(10)
        _, hwm = proc(process.pid)
        after = operator_requests(server)
        sent = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in after}
        return ready, cpu, hwm, {v: n for v, n in sent.items() if n}
    finally:
        process.terminate()
        process.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attach", required=True, metavar="KUBECONFIG")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "express-operator"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ways", default="paged,streamed",
                        help="paged, streamed or both (a build before --streaming-lists: paged)")
    args = parser.parse_args()
    kubeconfig = pathlib.Path(args.attach)
    server = re.search(r"server:\s*'?([^'\s]+)", kubeconfig.read_text()).group(1)
    for streaming in [way == "streamed" for way in args.ways.split(",")]:
        results = [one_start(args.binary, kubeconfig, server, streaming)
                   for _ in range(args.runs)]
        way = "streaming lists" if streaming else "paged lists"
        readies, cpus, hwms, sent = zip(*results)
        print(f"{way:>15}: ready in {min(readies):.2f} s (median {statistics.median(readies):.2f}); "
              f"CPU until ready {min(cpus):.2f} s (median {statistics.median(cpus):.2f}); "
              f"peak RSS {min(hwms):.0f} MiB (median {statistics.median(hwms):.0f}); "
              f"requests {sent[-1]}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs the workspace's Rust test binaries a few at a time (scripts/test.sh calls it).

`cargo test` runs one test binary after another: the kubesim end-to-end binaries mostly wait on
timers, so on two cores half the phase was one binary waiting. cargo-nextest runs binaries in
parallel, but a fresh machine would first compile it (longer than it saves there). This builds
the test binaries with cargo, then runs each as `cargo test` would (from its package's
directory, with cargo's runtime environment), at most JOBS at once, longest-known first; every
binary's output is printed when it ends, and the run fails if any binary failed.

    python3 scripts/rust-tests.py [--jobs N] [cargo test arguments...]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

# The binaries that took longest (debug build, 2 cores): started first so that none of them is
# the last one running. Order only; a binary missing here starts after these.
SLOW_FIRST = ["cache_memory", "e2e_crash", "e2e_settle", "e2e_verbs", "properties", "e2e_doctor",
              "e2e_rollout", "e2e_fleet", "e2e_argocd", "e2e_bounce", "e2e_scenarios", "e2e_throttle"]


def test_binaries(cargo_args):
    """(name, executable, package directory, package name) of every test binary cargo builds."""
    command = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    process = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if process.returncode != 0:
        sys.exit(f"building the tests failed: {' '.join(command)}")
    found = []
    for line in process.stdout.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        package_dir = str(pathlib.Path(message["manifest_path"]).parent)
        package = message["package_id"]
        name = message["target"]["name"]
        found.append((name, message["executable"], package_dir, package))
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    found.sort(key=lambda b: rank.get(b[0], len(rank)))
    return found


def package_name(package_id, package_dir):
    # `path+file:///...#name@0.1.0` or `path+file:///.../name#0.1.0`
    fragment = package_id.rsplit("#", 1)[-1]
    return fragment.split("@", 1)[0] if "@" in fragment else pathlib.Path(package_dir).name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    args, cargo_args = parser.parse_known_args()
    binaries = test_binaries(cargo_args)
    assert binaries, "cargo built no test binary"
    pending = list(binaries)
    failed, lock, started = [], threading.Lock(), time.time()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                name, executable, package_dir, package_id = pending.pop(0)
            env = {**os.environ, "CARGO_MANIFEST_DIR": package_dir,
                   "CARGO_PKG_NAME": package_name(package_id, package_dir)}
            began = time.time()
            result = subprocess.run([executable], cwd=package_dir, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            took = time.time() - began
            with lock:
                relative = os.path.relpath(executable)
                print(f"     Running {name} ({relative}), {took:.1f}s", flush=True)
                sys.stdout.write(result.stdout)
                sys.stdout.flush()
                if result.returncode != 0:
                    failed.append(f"{name} ({relative}): exit {result.returncode}")

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{len(binaries)} test binaries in {time.time() - started:.0f}s, {args.jobs} at a time")
    if failed:
        print("failed:\n  " + "\n  ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()

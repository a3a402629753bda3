#!/usr/bin/env python3
"""A newcomer's first run, measured (docs/benchmarks.md, "The first build and demo from a fresh
clone"): clone the committed tree into a new directory, run the README's main command there
(`cargo dev --demo`, the alias of .cargo/config.toml expanded so that `--timings` reaches cargo)
and time the build and the demo apart; then read cargo's timings for the crates that took longest and the critical
path (from the last unit to finish, back through the dependency whose end let each start).

    python3 scripts/first-run-bench.py [--runs 3] [--then-dcs-demo] [--keep]

Each run starts from an empty target directory; the crates' downloads (cargo's registry cache)
are shared with the machine, as a second clone on the same machine would share them. Run it with
nothing else busy: on 2 cores every other build doubles the figure.
"""

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

RUNNING = re.compile(r"^\s*Running `")


def clone(repository: Path, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(repository), str(into / "main")], check=True)
    shared = repository.parent / "shared"
    if shared.exists():
        (into / "shared").symlink_to(shared)
    return into / "main"


def readme_command(tree: Path, *args: str) -> list[str]:
    """`cargo dev ARGS` as cargo expands it, with `--timings` before the binary's arguments."""
    alias = tomllib.loads((tree / ".cargo" / "config.toml").read_text())["alias"]["dev"].split()
    split = alias.index("--")
    return ["cargo", *alias[:split], "--timings", *alias[split:], *args]


def timed_run(tree: Path, command: list[str], timeout: float) -> tuple[float | None, float, int, list[str]]:
    """Runs `command` in `tree`: (seconds until cargo ran the binary, seconds in all, exit code,
    the output's last lines)."""
    started = time.monotonic()
    built_at = None
    tail: list[str] = []
    process = subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if built_at is None and RUNNING.match(line):
                built_at = time.monotonic() - started
            tail = (tail + [line.rstrip()])[-12:]
            if time.monotonic() - started > timeout:
                process.kill()
                break
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return built_at, time.monotonic() - started, code, tail


def units(timings: Path) -> list[dict]:
    page = timings.read_text()
    found = re.search(r"const UNIT_DATA = (\[.*?\]);\s*\n", page, re.S)
    if not found:
        raise SystemExit(f"{timings}: no UNIT_DATA (has cargo's timings format changed?)")
    return json.loads(html.unescape(found.group(1)))


def label(unit: dict) -> str:
    target = unit.get("target", "").strip()
    suffix = f" {target}" if target else ""
    if unit.get("mode") == "run-custom-build":
        suffix = " build script (run)"
    return f"{unit['name']}{suffix}"


def critical_path(all_units: list[dict]) -> list[dict]:
    """From the unit that ended last, back through the unit whose end (or metadata) unblocked it."""
    by_index = {u["i"]: u for u in all_units}
    unblocked_by: dict[int, int] = {}
    for u in all_units:
        for i in u.get("unblocked_units", []) + u.get("unblocked_rmeta_units", []):
            unblocked_by[i] = u["i"]
    last = max(all_units, key=lambda u: u["start"] + u["duration"])
    chain = [last]
    while chain[-1]["i"] in unblocked_by:
        chain.append(by_index[unblocked_by[chain[-1]["i"]]])
    return list(reversed(chain))


def report(all_units: list[dict]) -> str:
    total = max(u["start"] + u["duration"] for u in all_units)
    work = sum(u["duration"] for u in all_units)
    lines = [f"cargo's own figures: {total:.0f} s wall, {work:.0f} s of compile work over {len(all_units)} units"]
    lines.append("longest units:")
    for u in sorted(all_units, key=lambda u: -u["duration"])[:12]:
        lines.append(f"  {label(u):45} {u['duration']:6.1f} s ({100 * u['duration'] / work:4.1f}% of the work)")
    lines.append("critical path (start → end, seconds):")
    for u in critical_path(all_units):
        lines.append(f"  {label(u):45} {u['start']:6.1f} → {u['start'] + u['duration']:6.1f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--then-dcs-demo", action="store_true",
                        help="after each run, `dev --dcs 3 --demo` on the same build")
    parser.add_argument("--keep", action="store_true", help="keep each clone (its target/cargo-timings)")
    parser.add_argument("--timeout", type=float, default=2400)
    args = parser.parse_args()
    repository = Path(__file__).resolve().parent.parent
    failed = False
    for run in range(1, args.runs + 1):
        workdir = Path(tempfile.mkdtemp(prefix="first-run-"))
        tree = clone(repository, workdir)
        command = readme_command(tree, "--demo")
        built, total, code, tail = timed_run(tree, command, args.timeout)
        print(f"== run {run}: `{' '.join(command)}` on a fresh clone: exit {code}, "
              f"built in {built or float('nan'):.0f} s, demo {total - (built or total):.0f} s, "
              f"{total:.0f} s in all ({total / 60:.1f} min)")
        if code != 0:
            failed = True
            print("\n".join(tail))
        print(report(units(tree / "target" / "cargo-timings" / "cargo-timing.html")))
        if args.then_dcs_demo:
            dcs = ["cargo", "dev", "--dcs", "3", "--demo"]
            _, dcs_total, dcs_code, dcs_tail = timed_run(tree, dcs, args.timeout)
            print(f"   then `{' '.join(dcs)}`: exit {dcs_code} in {dcs_total:.0f} s")
            if dcs_code != 0:
                failed = True
                print("\n".join(dcs_tail))
        sys.stdout.flush()
        if args.keep:
            print(f"   kept: {tree}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

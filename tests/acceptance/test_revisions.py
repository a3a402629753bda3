"""`kubectl express revisions --chart` through a `helm` on PATH. That `helm` is helm_shim.py, a
shim on the Helm engine (helm-python-sdk), not Helm's own CLI: see its docstring."""

import json
import os
import subprocess
import sys

from conftest import KUBECTL_EXPRESS, ROOT


def helm_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helm = bin_dir / "helm"
    helm.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT / 'tests' / 'acceptance')!r})\n"
                    "import helm_shim\nsys.exit(helm_shim.main(sys.argv[1:]))\n")
    helm.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def revisions(env, *args):
    return subprocess.run([KUBECTL_EXPRESS, "revisions", *args], env=env, capture_output=True, text=True)


def test_the_chart_is_rendered_through_helm_with_a_values_file(tmp_path):
    env = helm_on_path(tmp_path)
    values = tmp_path / "values.yaml"
    values.write_text("instance: globex\ninstanceId: 7\nnodes:\n  be: {up: true}\n  fe1: {up: true}\n  fe2: {up: false}\n"
                      "expressVersion: {Backend: express-e690.1, Frontend: express-e690.1}\n")
    result = revisions(env, "--chart", str(ROOT / "charts" / "express-tenant"), "--values", str(values),
                       "--release", "globex", "-n", "tenant-globex", "-o", "json", "-v")
    assert result.returncode == 0, result.stderr
    nodes = json.loads(result.stdout)["nodes"]
    assert [(n["namespace"], n["name"], n["kind"]) for n in nodes] == [
        ("tenant-globex", "globex-be", "Backend"),
        ("tenant-globex", "globex-fe1", "Frontend"),
        ("tenant-globex", "globex-fe2", "Frontend"),
    ]
    assert all(n["source"] == "computed" and len(n["revision"]) == 10 for n in nodes)
    assert nodes[0]["spec"]["expressVersion"] == "express-e690.1"

    # --set overrides the values file, and a new version gives every node a new revision.
    newer = revisions(env, "--chart", str(ROOT / "charts" / "express-tenant"), "--values", str(values),
                      "--set", "expressVersion.Backend=express-e690.2", "--set", "expressVersion.Frontend=express-e690.2", "--release", "globex", "-n", "tenant-globex",
                      "-o", "json")
    assert newer.returncode == 0, newer.stderr
    before = {n["name"]: n["revision"] for n in nodes}
    after = {n["name"]: n["revision"] for n in json.loads(newer.stdout)["nodes"]}
    assert before.keys() == after.keys() and all(before[k] != after[k] for k in before)


def test_a_failing_helm_is_exit_2_with_its_message(tmp_path):
    env = helm_on_path(tmp_path)
    result = revisions(env, "--chart", str(tmp_path / "no-such-chart"))
    assert result.returncode == 2
    assert "helm template" in result.stderr and "failed" in result.stderr

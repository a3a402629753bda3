"""docs/install.md's walk-through on a real Kubernetes, run as written: the shell block of "Trying
it on a real Kubernetes", with the tests' binaries standing in for the release build (`cargo` is
a no-op here: the suite already built them), the virtualenv's kubectl 1.37 and the helm shim
(helm_shim.py, Helm's engine) on PATH. It brings up a control plane of its own and downs it."""

import os
import re
import subprocess

import pytest

from conftest import KUBECTL, KUBECTL_EXPRESS, OPERATOR, ROOT
from test_revisions import helm_on_path


def walkthrough():
    text = (ROOT / "docs" / "install.md").read_text()
    section = text.split("## Trying it on a real Kubernetes", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


@pytest.mark.real_control_plane
def test_the_install_walkthrough_works_as_written(tmp_path):
    script = walkthrough()
    assert "scripts/real-cluster.sh up $REAL" in script and "real-cluster.sh down $REAL" in script
    real = tmp_path / "real"
    assert 'REAL="$PWD/target/express-real"' in script, "the walk-through names its directory"
    script = script.replace('REAL="$PWD/target/express-real"', f"REAL={real}")
    env = helm_on_path(tmp_path)
    binaries = {os.path.dirname(p) for p in (KUBECTL, KUBECTL_EXPRESS, OPERATOR)}
    env["PATH"] = os.pathsep.join([*binaries, env["PATH"]])
    env.pop("KUBECONFIG", None)
    env["KUBECACHEDIR"] = str(tmp_path / "kubectl-cache")  # its server's own (conftest's Cluster.env)
    prelude = "set -euo pipefail\ncargo() { :; }\n"
    try:
        result = subprocess.run(["bash", "-c", prelude + script], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=1200)
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "real-cluster.sh"), "down", str(real)], timeout=60)
    log = (real / "operator.log").read_text()[-3000:] if (real / "operator.log").exists() else ""
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n--- operator\n{log}"
    assert "Complete: all 5 up nodes Ready on their desired revision" in result.stdout, result.stdout
    assert not (real / "pids").exists(), "down stopped every process"

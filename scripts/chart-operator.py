"""The operator as the operator chart runs it, for the benchmarks (docs/benchmarks.md):

    .venv/bin/python scripts/chart-operator.py args
        the flags the chart's Deployment passes the operator at its default values, one a line
        (`run` first); --metrics-addr is left out (a benchmark picks a free port)
    .venv/bin/python scripts/chart-operator.py account DIR
        on the real control plane started in DIR (scripts/real-cluster.sh up DIR): the chart's
        ServiceAccount, RBAC, PriorityLevelConfiguration and FlowSchema applied, and
        DIR/express-operator.kubeconfig written, holding that account's token and nothing else

Both render the chart with the real Helm engine, as the acceptance tests do."""

import pathlib
import sys

import helm_python as helm
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "acceptance"))

from real_cluster import OPERATOR_NAMESPACE, Real  # noqa: E402


def chart_args():
    manifests = helm.Chart.load(str(ROOT / "charts" / "express-operator")).render(
        {}, name="express", namespace=OPERATOR_NAMESPACE)
    deployments = [d for key, text in manifests.items() if not key.endswith("NOTES.txt")
                   for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment"]
    [deployment] = deployments
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return [a for a in container["args"] if not a.startswith("--metrics-addr")]


def main(argv):
    if argv[:1] == ["args"] and len(argv) == 1:
        print("\n".join(chart_args()))
    elif argv[:1] == ["account"] and len(argv) == 2:
        directory = pathlib.Path(argv[1]).resolve()
        path = Real(directory).account_kubeconfig("express-operator")
        print(path)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

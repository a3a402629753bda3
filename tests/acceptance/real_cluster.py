"""Kubernetes' own control plane under the tests (DESIGN section 17): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, started on loopback by
scripts/real-cluster.sh, one per test session (a start takes seconds, not milliseconds). Tests
share it and keep apart by namespace; the operator runs there as the operator chart's
ServiceAccount, with the chart's own RBAC, never as cluster-admin."""

import subprocess

import helm_python as helm
import yaml

from conftest import ROOT, Cluster

SCRIPT = ROOT / "scripts" / "real-cluster.sh"
OPERATOR_NAMESPACE = "express-system"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# The operator's own API Priority and Fairness level and the schema that sends it there.
FLOW_CONTROL_KINDS = {"PriorityLevelConfiguration", "FlowSchema"}


class Real(Cluster):
    substrate = "real"

    def __init__(self, directory):
        super().__init__(directory / "kubeconfig")
        self.directory = directory
        self.accounts = {}

    def account_kubeconfig(self, account):
        if account not in self.accounts:
            self.accounts[account] = self._install_operator_rbac(account)
        return self.accounts[account]

    def _chart_rbac(self, account):
        """The operator chart's ServiceAccount, ClusterRoles, Roles and bindings, and its API
        Priority and Fairness level and schema, as Helm renders them, for `account` (the chart's
        own, `express-operator`, or another given the same rules under names of its own)."""
        manifests = helm.Chart.load(str(ROOT / "charts" / "express-operator")).render(
            {}, name="express", namespace=OPERATOR_NAMESPACE)
        kinds = RBAC_KINDS | FLOW_CONTROL_KINDS
        rbac = [d for key, text in manifests.items() if not key.endswith("NOTES.txt")
                for d in yaml.safe_load_all(text) if d and d["kind"] in kinds]
        assert {d["kind"] for d in rbac} == kinds, "the chart renders its RBAC and flow control"
        if account != "express-operator":
            suffix = account.removeprefix("express-operator-")
            for document in rbac:
                if document["kind"] == "ServiceAccount":
                    document["metadata"]["name"] = account
                    continue
                document["metadata"]["name"] += f"-{suffix}"
                if "roleRef" in document:
                    document["roleRef"]["name"] += f"-{suffix}"
                    for subject in document["subjects"]:
                        subject["name"] = account
                if document["kind"] == "FlowSchema":
                    document["spec"]["priorityLevelConfiguration"]["name"] += f"-{suffix}"
                    for rule in document["spec"]["rules"]:
                        for subject in rule["subjects"]:
                            subject["serviceAccount"]["name"] = account
        return rbac

    def _install_operator_rbac(self, account):
        """The chart's RBAC for `account`, applied; returns a kubeconfig holding that account's
        token (`kubectl create token`) and nothing else."""
        self.kubectl("create", "namespace", OPERATOR_NAMESPACE, check=False)
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(self._chart_rbac(account)))
        token = self.kubectl("create", "token", account, "-n", OPERATOR_NAMESPACE,
                             "--duration", "24h").stdout.strip()
        path = self.directory / f"{account}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "operator",
            "clusters": [{"name": "real", "cluster": {
                "server": self.url, "certificate-authority": str(self.directory / "pki" / "ca.crt")}}],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": "real", "user": account}}],
        }))
        return path

    def deny_writes(self, account):
        """What a build that cannot write meets on a real cluster: `account`'s roles lose every
        verb but get, list and watch, except on its Lease (it stays the leader it was)."""
        for document in self._chart_rbac(account):
            if document["kind"] not in ("ClusterRole", "Role"):
                continue
            for rule in document["rules"]:
                if rule["resources"] != ["leases"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v in ("get", "list", "watch")] or ["get"]
            self.kubectl("apply", "-f", "-", input=yaml.safe_dump(document))

    def restart(self, component):
        """A fault: `component` (etcd, kube-apiserver...) killed with SIGKILL and started again on
        its data and ports; returns once it answers."""
        result = subprocess.run(["bash", str(SCRIPT), "restart", str(self.directory), component],
                                capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"{component} did not come back:\n{result.stderr[-4000:]}"

    def kill_component(self, component):
        """A fault that lasts: `component` killed with SIGKILL; it stays down until
        `start_component`."""
        self._fault("kill", component)

    def start_component(self, component):
        """`component` started again on its data and ports; returns once it answers."""
        result = subprocess.run(["bash", str(SCRIPT), "start", str(self.directory), component],
                                capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"{component} did not come back:\n{result.stderr[-4000:]}"

    def cut(self):
        """A fault (a control plane up with `--apiservers 2`): every connection to the API servers
        closed at once through the front."""
        self._fault("cut")

    def lag(self, apiserver, milliseconds):
        """A fault (with `--apiservers 2`): `apiserver`'s answers and watch events late by
        `milliseconds`; 0 undoes it."""
        self._fault("lag", apiserver, str(milliseconds))

    def squeeze(self, account, namespace=OPERATOR_NAMESPACE):
        """A fault: API Priority and Fairness rejects what it cannot run of `account`'s requests,
        one at a time at most; `unsqueeze` undoes it."""
        self._fault("squeeze", namespace, account)

    def unsqueeze(self):
        self._fault("unsqueeze")

    def _fault(self, verb, *args):
        result = subprocess.run(["bash", str(SCRIPT), verb, str(self.directory), *args],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{verb} {' '.join(args)} failed:\n{result.stderr[-4000:]}"

    def namespace(self, prefix="tenant"):
        # Pods are admitted once the service-account controller gave the namespace its account.
        name = super().namespace(prefix)
        self.kubectl("wait", "--for=create", "serviceaccount/default", "-n", name, "--timeout=30s")
        return name


def up(directory, *flags):
    result = subprocess.run(["bash", str(SCRIPT), "up", str(directory), *flags], capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, f"the real control plane did not start:\n{result.stderr[-4000:]}"
    return Real(directory)


def down(real):
    subprocess.run(["bash", str(SCRIPT), "down", str(real.directory)], capture_output=True, timeout=60)

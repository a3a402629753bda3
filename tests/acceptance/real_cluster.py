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


class Real(Cluster):
    substrate = "real"

    def __init__(self, directory):
        super().__init__(directory / "kubeconfig")
        self.directory = directory
        self._operator_kubeconfig = None

    @property
    def operator_kubeconfig(self):
        if self._operator_kubeconfig is None:
            self._operator_kubeconfig = self._install_operator_rbac()
        return self._operator_kubeconfig

    def _install_operator_rbac(self):
        """The operator chart's ServiceAccount, ClusterRoles, Roles and bindings as Helm renders
        them, applied; returns a kubeconfig holding that account's token (`kubectl create
        token`) and nothing else."""
        manifests = helm.Chart.load(str(ROOT / "charts" / "express-operator")).render(
            {}, name="express", namespace=OPERATOR_NAMESPACE)
        rbac = [d for key, text in manifests.items() if not key.endswith("NOTES.txt")
                for d in yaml.safe_load_all(text) if d and d["kind"] in RBAC_KINDS]
        assert {d["kind"] for d in rbac} == RBAC_KINDS, "the chart renders its RBAC"
        self.kubectl("create", "namespace", OPERATOR_NAMESPACE, check=False)
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(rbac))
        token = self.kubectl("create", "token", "express-operator", "-n", OPERATOR_NAMESPACE,
                             "--duration", "24h").stdout.strip()
        path = self.directory / "operator.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "operator",
            "clusters": [{"name": "real", "cluster": {
                "server": self.url, "certificate-authority": str(self.directory / "pki" / "ca.crt")}}],
            "users": [{"name": "express-operator", "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": "real", "user": "express-operator"}}],
        }))
        return path

    def namespace(self, prefix="tenant"):
        # Pods are admitted once the service-account controller gave the namespace its account.
        name = super().namespace(prefix)
        self.kubectl("wait", "--for=create", "serviceaccount/default", "-n", name, "--timeout=30s")
        return name


def up(directory):
    result = subprocess.run(["bash", str(SCRIPT), "up", str(directory)], capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, f"the real control plane did not start:\n{result.stderr[-4000:]}"
    return Real(directory)


def down(real):
    subprocess.run(["bash", str(SCRIPT), "down", str(real.directory)], capture_output=True, timeout=60)

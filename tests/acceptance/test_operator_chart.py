"""charts/express-operator rendered and linted by the real Helm engine (helm-python-sdk): every
values toggle, the restricted security context, and RBAC rules that are rbac/*.yaml as they are
(the Rust test crates/express-operator/tests/rbac.rs measures those against what the operator
sends)."""

import helm_python as helm
import pytest
import yaml

from conftest import ROOT

CHART = ROOT / "charts" / "express-operator"


def render(values=None, namespace="express-system"):
    manifests = helm.Chart.load(str(CHART)).render(values or {}, name="express", namespace=namespace)
    objects = []
    for key, text in manifests.items():
        if key.endswith("NOTES.txt"):
            continue
        objects.extend(d for d in yaml.safe_load_all(text) if d)
    return objects, manifests


def find(objects, kind, name=None, namespace=None):
    return [o for o in objects if o["kind"] == kind
            and (name is None or o["metadata"]["name"] == name)
            and (namespace is None or o["metadata"].get("namespace") == namespace)]


def rules(file):
    return yaml.safe_load((CHART / "rbac" / file).read_text())


def test_lint_is_clean():
    report = helm.lint(str(CHART), strict=True)
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_defaults_cluster_wide_two_replicas_leader_elected_restricted():
    objects, manifests = render()
    [deployment] = find(objects, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    [container] = spec["containers"]
    assert container["args"][:2] == ["run", "--leader-elect"]
    assert "--operator-namespace=express-system" in container["args"]
    assert not any(a.startswith("--namespace=") for a in container["args"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]
    pod_security, security = spec["securityContext"], container["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] == 65532
    assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
    assert security == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert find(objects, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1
    assert find(objects, "Service", "express-operator-metrics")
    [cluster_role] = find(objects, "ClusterRole", "express-express-operator")
    assert cluster_role["rules"] == rules("watched-namespaces.yaml")
    [api] = find(objects, "ClusterRole", "express-express-operator-api")
    assert api["rules"] == rules("own-api.yaml")
    [own] = find(objects, "Role", "express-operator-self", "express-system")
    assert own["rules"] == rules("operator-namespace.yaml")
    assert find(objects, "ClusterRoleBinding")[0]["subjects"][0]["name"] == "express-operator"
    assert not find(objects, "ServiceMonitor") and not find(objects, "PrometheusRule")
    for rule in cluster_role["rules"] + own["rules"] + api["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
    # Its own CRDs only, by name.
    [crds] = [r for r in api["rules"] if r["resources"] == ["customresourcedefinitions"]]
    assert sorted(crds["resourceNames"]) == sorted(p.stem for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    assert "every namespace" in next(v for k, v in manifests.items() if k.endswith("NOTES.txt"))


def test_watched_namespaces_get_a_role_each_and_no_cluster_role():
    objects, _ = render({"watchNamespaces": ["tenant-a", "tenant-b"]})
    # Cluster-wide: only its own API (a CRD is one per cluster, and so is what it stores).
    assert [r["metadata"]["name"] for r in find(objects, "ClusterRole")] == ["express-express-operator-api"]
    assert [b["roleRef"]["name"] for b in find(objects, "ClusterRoleBinding")] == ["express-express-operator-api"]
    for namespace in ("tenant-a", "tenant-b"):
        [role] = find(objects, "Role", "express-operator", namespace)
        assert role["rules"] == rules("watched-namespaces.yaml")
        assert find(objects, "RoleBinding", "express-operator", namespace)
    args = find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=tenant-a" in args and "--namespace=tenant-b" in args


@pytest.mark.parametrize("values, check", [
    ({"leaderElect": False, "replicas": 1},
     lambda o: "--leader-elect" not in find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]),
    ({"podDisruptionBudget": {"enabled": False}}, lambda o: not find(o, "PodDisruptionBudget")),
    ({"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}},
     lambda o: find(o, "ServiceMonitor")[0]["metadata"]["labels"]["release"] == "prom"),
    ({"metrics": {"prometheusRule": {"enabled": True}}},
     lambda o: {r["alert"] for r in find(o, "PrometheusRule")[0]["spec"]["groups"][0]["rules"]}
     == {"ExpressRolloutFailed", "ExpressClusterHalted", "ExpressOperatorReconcileErrors", "ExpressOperatorNoLeader",
         "ExpressOperatorBacklog", "ExpressFleetSpread", "ExpressOperatorDown",
         "ExpressOperatorReleaseRolledBack", "ExpressOperatorReleaseInconclusive"}),
    ({"image": {"repository": "registry.example/express-operator", "tag": "1.2.3"}},
     lambda o: find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["image"]
     == "registry.example/express-operator:1.2.3"),
    ({"nodeSelector": {"pool": "ops"}, "tolerations": [{"key": "ops", "operator": "Exists"}],
      "affinity": {"podAntiAffinity": {}}, "podAnnotations": {"a": "b"}, "concurrency": 2, "logLevel": "debug"},
     lambda o: find(o, "Deployment")[0]["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "ops"}),
    ({"kubeApi": {"qps": 5.5, "burst": 8}},
     lambda o: {"--kube-qps=5.5", "--kube-burst=8"}
     <= set(find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"])
     and "--streaming-lists" not in find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]),
    ({"kubeApi": {"streamingLists": True}},
     lambda o: "--streaming-lists" in find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]),
    ({},
     lambda o: "--stale-after=2m" in find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]),
    ({"releaseJudge": {"staleAfter": "1m30s"}},
     lambda o: "--stale-after=1m30s" in find(o, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]),
])
def test_every_toggle_renders(values, check):
    objects, _ = render(values)
    assert check(objects)


def test_the_schema_refuses_a_rate_limit_of_zero():
    with pytest.raises(Exception):
        render({"kubeApi": {"qps": 0}})
    with pytest.raises(Exception):
        render({"kubeApi": {"burst": 0}})


def test_the_schema_refuses_a_judge_threshold_that_is_not_a_duration():
    with pytest.raises(Exception):
        render({"releaseJudge": {"staleAfter": "soon"}})
    with pytest.raises(Exception):
        render({"releaseJudge": {"staleAfter": ""}})


def test_the_schema_refuses_a_misspelt_value():
    with pytest.raises(Exception) as error:
        render({"replica": 3})
    assert "additional properties 'replica' not allowed" in str(error.value)


def test_the_alert_metrics_exist():
    # Each alert reads a metric the operator registers (crates/express-operator/src/metrics.rs
    # and the groups of metric_groups.rs).
    objects, _ = render({"metrics": {"prometheusRule": {"enabled": True}}})
    src = ROOT / "crates" / "express-operator" / "src"
    source = "".join((src / name).read_text() for name in ("metrics.rs", "metric_groups.rs"))
    for rule in find(objects, "PrometheusRule")[0]["spec"]["groups"][0]["rules"]:
        for metric in ("rollout_failures", "nodes", "reconcile_errors", "leader", "tenants",
                       "unhealthy_tenants", "unhealthy_namespaces",
                       "oldest_unobserved_generation_seconds", "ring_tenants", "build_info"):
            if f"express_operator_{metric}" in rule["expr"]:
                assert f'"{metric}"' in source, metric


def test_crds_are_in_the_chart():
    names = sorted(p.name for p in (CHART / "crds").iterdir())
    assert names == sorted(p.name for p in (ROOT / "deploy" / "crds").iterdir())


def test_the_rendered_chart_applies_with_kubectl(sim):
    # Everything the chart writes (CRDs first, as Helm installs them) is accepted by the API.
    crds = "\n---\n".join(p.read_text() for p in sorted((CHART / "crds").iterdir()))
    sim.kubectl("apply", "-f", "-", input=crds)
    sim.kubectl("apply", "-f", "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: express-system}\n")
    _, manifests = render({"watchNamespaces": ["express-system"]})
    rendered = "\n---\n".join(v for k, v in sorted(manifests.items()) if not k.endswith("NOTES.txt"))
    out = sim.kubectl("apply", "-f", "-", input=rendered).stdout
    for created in ("serviceaccount/express-operator", "deployment.apps/express-operator",
                    "poddisruptionbudget.policy/express-operator", "role.rbac.authorization.k8s.io/express-operator",
                    "rolebinding.rbac.authorization.k8s.io/express-operator-self", "service/express-operator-metrics",
                    "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/express-express-operator",
                    "flowschema.flowcontrol.apiserver.k8s.io/express-express-operator"):
        assert f"{created} created" in out, out
    table = sim.kubectl("get", "sa,deploy,pdb", "-n", "express-system").stdout
    assert "express-operator" in table, table


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_default_ring_keeps_the_deployment_and_selector_of_a_release_before_rings():
    objects, _ = render()
    [deployment] = find(objects, "Deployment")
    assert deployment["metadata"]["name"] == "express-operator"
    # A Deployment's selector cannot change: an upgrade from a release without rings must work.
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "express-operator", "app.kubernetes.io/instance": "express"}
    assert "--ring=default" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_each_ring_gets_its_deployment_image_and_budget_sharing_rbac_and_the_metrics_service():
    objects, manifests = render({"image": {"tag": "1.2.0"}, "rings": [
        {"name": "default"},
        {"name": "canary", "image": {"tag": "1.3.0-rc.1"}, "replicas": 1,
         "resources": {"requests": {"cpu": "10m"}}}]})
    deployments = {d["metadata"]["name"]: d for d in find(objects, "Deployment")}
    assert set(deployments) == {"express-operator", "express-operator-canary"}
    default, canary = deployments["express-operator"], deployments["express-operator-canary"]
    container = canary["spec"]["template"]["spec"]["containers"][0]
    assert "--ring=canary" in container["args"]
    assert container["image"].endswith(":1.3.0-rc.1")
    assert default["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":1.2.0")
    assert (canary["spec"]["replicas"], default["spec"]["replicas"]) == (1, 2)
    assert container["resources"] == {"requests": {"cpu": "10m"}}
    # No Deployment selects the other ring's pods; the metrics Service selects both.
    pod_labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments.items()}
    for name, d in deployments.items():
        for other, labels in pod_labels.items():
            assert selects(d["spec"]["selector"]["matchLabels"], labels) == (name == other)
    [service] = find(objects, "Service", "express-operator-metrics")
    assert all(selects(service["spec"]["selector"], labels) for labels in pod_labels.values())
    budgets = find(objects, "PodDisruptionBudget")
    assert {b["metadata"]["name"] for b in budgets} == {"express-operator", "express-operator-canary"}
    assert len(find(objects, "ClusterRole")) == 2 and len(find(objects, "ServiceAccount")) == 1
    notes = next(v for k, v in manifests.items() if k.endswith("NOTES.txt"))
    assert "ring canary: 1 replica(s) of 1.3.0-rc.1" in notes and "Lease express-operator-canary" in notes


def test_rings_named_twice_or_badly_are_refused():
    with pytest.raises(Exception) as error:
        render({"rings": [{"name": "canary"}, {"name": "canary"}]})
    assert "listed twice" in str(error.value)
    for bad in ("Canary", "canary_1", "-a", "x" * 47):
        with pytest.raises(Exception):
            render({"rings": [{"name": bad}]})
    with pytest.raises(Exception):
        render({"rings": []})


def test_the_conversion_webhook_is_off_by_default_and_on_selects_only_pods_that_serve_it():
    objects, _ = render()
    assert not find(objects, "Service", "express-operator-webhook")
    [container] = find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    assert not any(a.startswith("--conversion-webhook-addr") for a in container["args"])

    objects, _ = render({"conversionWebhook": {"enabled": True, "port": 9444},
                         "rings": [{"name": "default"}, {"name": "canary"}]})
    [service] = find(objects, "Service", "express-operator-webhook", "express-system")
    # Every ring's pods, but only those labelled by themselves as knowing every listed version.
    assert service["spec"]["selector"] == {"app.kubernetes.io/part-of": "express-operator",
                                           "app.kubernetes.io/instance": "express",
                                           "express.dev/conversion": "serving"}
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook"}]
    for deployment in find(objects, "Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert "--conversion-webhook-addr=0.0.0.0:9444" in container["args"]
        assert {"name": "webhook", "containerPort": 9444} in container["ports"]
        assert {"app.kubernetes.io/part-of": "express-operator", "app.kubernetes.io/instance": "express"}.items() \
            <= deployment["spec"]["template"]["metadata"]["labels"].items()
        assert any(e["name"] == "POD_NAME" for e in container["env"]), "a pod labels itself by its name"
    [role] = [r for r in find(objects, "Role") if r["metadata"]["namespace"] == "express-system"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]} in role["rules"]


def test_the_operator_gets_its_own_priority_level_for_its_service_account():
    objects, _ = render(namespace="ops")
    [level] = find(objects, "PriorityLevelConfiguration", "express-express-operator")
    [schema] = find(objects, "FlowSchema", "express-express-operator")
    assert level["spec"]["type"] == "Limited"
    limited = level["spec"]["limited"]
    assert limited["nominalConcurrencyShares"] == 20
    assert limited["limitResponse"]["queuing"]["handSize"] <= limited["limitResponse"]["queuing"]["queues"]
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == "express-express-operator"
    # After the system's schemas (at most 900), before the suggested service-accounts (9000).
    assert 900 < schema["spec"]["matchingPrecedence"] < 9000
    [rule] = schema["spec"]["rules"]
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": "express-operator", "namespace": "ops"}}]
    # The client-side limit is a ceiling, far above controller-runtime's 20/30.
    [deployment] = find(objects, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--kube-qps=200" in args and "--kube-burst=400" in args

    objects, _ = render({"flowControl": {"enabled": False}})
    assert not find(objects, "PriorityLevelConfiguration") and not find(objects, "FlowSchema")

"""kubesim through the Python kubernetes client."""

import threading

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def api(sim):
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


def config_map(name):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"k": "v"})


def test_list_then_watch_from_the_list_resource_version(sim):
    core = api(sim)
    core.create_namespaced_config_map("default", config_map("before"))
    listed = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listed.items] == ["before"]
    rv = listed.metadata.resource_version
    core.create_namespaced_config_map("default", config_map("after"))
    events = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=2):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 1:
            break
    assert events == [("ADDED", "after")], "only what happened after the list"


def test_bookmarks_are_delivered(sim):
    core = api(sim)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    # kubesim is started with a 0.2 s bookmark interval.
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv,
                          allow_watch_bookmarks=True, timeout_seconds=3):
        seen.append(event["type"])
        if event["type"] == "BOOKMARK":
            w.stop()
    assert "BOOKMARK" in seen


def test_410_after_compaction_and_recovery(sim):
    core = api(sim)
    core.create_namespaced_config_map("default", config_map("a"))
    old_rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", config_map("b"))
    sim.control("POST", "compact")
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=2):
            pass
    assert gone.value.status == 410
    # Recovery as clients do it: list again, watch from the new resourceVersion.
    fresh = core.list_namespaced_config_map("default")
    assert sorted(c.metadata.name for c in fresh.items) == ["a", "b"]
    done = threading.Event()

    def create_later():
        done.wait(0.3)
        core.create_namespaced_config_map("default", config_map("c"))

    threading.Thread(target=create_later).start()
    for event in watch.Watch().stream(core.list_namespaced_config_map, "default",
                                      resource_version=fresh.metadata.resource_version, timeout_seconds=3):
        assert event["object"].metadata.name == "c"
        break


def test_create_and_update_conflicts(sim):
    core = api(sim)
    created = core.create_namespaced_config_map("default", config_map("x"))
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_config_map("default", config_map("x"))
    assert exists.value.status == 409
    created.data = {"k": "first"}
    core.replace_namespaced_config_map("x", "default", created)
    created.data = {"k": "stale"}
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("x", "default", created)
    assert stale.value.status == 409
    assert "modified" in stale.value.body
    assert core.read_namespaced_config_map("x", "default").data == {"k": "first"}


def test_a_label_selector_watch_sees_deleted_when_the_label_goes(sim):
    """An object that stops matching a watch's label selector is DELETED on that watch, and one
    that starts matching is ADDED, as the API server does."""
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))
    body = {"metadata": {"name": "watched", "labels": {"team": "blue"}}, "data": {"a": "1"}}
    api.create_namespaced_config_map("default", body)
    start = api.list_namespaced_config_map("default", label_selector="team=blue").metadata.resource_version
    api.patch_namespaced_config_map("watched", "default", {"metadata": {"labels": {"team": "red"}}})
    api.patch_namespaced_config_map("watched", "default", {"data": {"a": "2"}})  # outside: unseen
    api.patch_namespaced_config_map("watched", "default", {"metadata": {"labels": {"team": "blue"}}})
    seen = []
    for event in watch.Watch().stream(api.list_namespaced_config_map, "default", label_selector="team=blue",
                                      resource_version=start, timeout_seconds=3):
        seen.append((event["type"], event["object"].metadata.labels.get("team")))
        if len(seen) == 2:
            break
    assert seen == [("DELETED", "red"), ("ADDED", "blue")]

"""kwok deletes a terminating pod by its name alone. When the event that makes it do so comes late
(through an API server that lags, or again after its watch lists anew), the pod by that name may
already be the one created to replace it, and kwok deletes that instead: a kubelet never does, its
deletion carries the pod's UID as a precondition. The chaos test found it (tests/acceptance/
test_chaos.py: a node replaced twice, the operator re-creating the pod kwok had deleted).

kwok also gives up on a pod's stage when the write that plays it fails with anything but a
timeout, a 503, a 429 or a refused connection: a 500 (how a write fails while etcd is down, "rpc
error: code = Unavailable") or a connection reset (a cut) drops the stage until the pod changes
again or kwok's informer lists again, 5 to 10 minutes later. A kubelet retries its status on its
next sync, seconds later. The chaos test found it too (tenants waiting 6 minutes after the last
fault on a pod kwok never made Ready, or never removed).

This makes a copy of kwok's module with those two places changed (the deletion made with the UID
precondition; a 500, a reset connection and an unexpected EOF retried with kwok's own backoff, as
its other transient errors are) and a module file for the build: this directory's go.mod with
kwok replaced by the copy, and its go.sum. Nothing else of the pins moves. An upstream fix would
be the same precondition in kwok's PodController.deleteResource, and the same cases in
controllers/utils.go's shouldRetry.

    python3 kwok-patched.py KWOK_MODULE_DIR OUT_DIR
"""

import pathlib
import shutil
import stat
import sys

here = pathlib.Path(__file__).resolve().parent
source_dir, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).resolve()
copy = out_dir / "kwok"
shutil.rmtree(out_dir, ignore_errors=True)
shutil.copytree(source_dir, copy)
for path in [copy, *copy.rglob("*")]:  # the module cache's files are read-only
    path.chmod(path.stat().st_mode | stat.S_IWUSR)

controller = copy / "pkg" / "kwok" / "controllers" / "pod_controller.go"
by_name = "c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)"
by_uid = ("c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{"
          "GracePeriodSeconds: deleteOpt.GracePeriodSeconds, "
          "Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})")
text = controller.read_text()
if text.count(by_name) != 1:
    sys.exit(f"kwok-patched: {controller} no longer deletes a pod as this expects; look again")
controller.write_text(text.replace(by_name, by_uid))

utils = copy / "pkg" / "kwok" / "controllers" / "utils.go"
transient = "apierrors.IsTooManyRequests(err) {"
also_transient = ("apierrors.IsTooManyRequests(err) ||\n\t\tapierrors.IsInternalError(err) ||\n"
                  "\t\tutilnet.IsConnectionReset(err) ||\n\t\tutilnet.IsProbableEOF(err) {")
text = utils.read_text()
if text.count(transient) != 1 or "func shouldRetry(err error) bool" not in text:
    sys.exit(f"kwok-patched: {utils} no longer decides retries as this expects; look again")
utils.write_text(text.replace(transient, also_transient))

build = out_dir / "build"
build.mkdir()
(build / "go.mod").write_text((here / "go.mod").read_text() + f"\nreplace sigs.k8s.io/kwok => {copy}\n")
shutil.copy(here / "go.sum", build / "go.sum")

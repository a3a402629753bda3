"""A `helm` SHIM, not Helm's CLI: just enough of `helm template` for the tests, on top of the Helm
engine they already install (helm-python-sdk renders the chart with Helm's own Go templates).

    helm template RELEASE CHART [--namespace NS] [--values FILE]... [--set key.path=value]...
                                [--show-only templates/FILE]...

Anything else exits 2. The tests put it on PATH as `helm` to check `kubectl express revisions
--chart`, which runs whatever `helm` it finds."""

import sys

import helm_python as helm
import yaml


def merge(base, layer):
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value


def scalar(text):
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def main(argv):
    if len(argv) < 3 or argv[0] != "template":
        print("helm shim: only `helm template RELEASE CHART ...` is implemented", file=sys.stderr)
        return 2
    release, chart_dir, rest = argv[1], argv[2], argv[3:]
    namespace, values, only = "default", {}, []
    while rest:
        flag, rest = rest[0], rest[1:]
        if not rest:
            print(f"helm shim: {flag} needs a value", file=sys.stderr)
            return 2
        value, rest = rest[0], rest[1:]
        if flag in ("--namespace", "-n"):
            namespace = value
        elif flag in ("--show-only", "-s"):
            only.append(value)
        elif flag in ("--values", "-f"):
            with open(value) as f:
                merge(values, yaml.safe_load(f) or {})
        elif flag == "--set":
            key, _, raw = value.partition("=")
            layer = scalar(raw)
            for part in reversed(key.split(".")):
                layer = {part: layer}
            merge(values, layer)
        else:
            print(f"helm shim: unknown flag {flag}", file=sys.stderr)
            return 2
    manifests = helm.Chart.load(chart_dir).render(values, name=release, namespace=namespace)
    # Like helm template: the NOTES are not part of the output; --show-only names a template by
    # its path in the chart.
    shown = [k for k in sorted(manifests) if not k.endswith("NOTES.txt")
             and (not only or any(k.endswith("/" + path) for path in only))]
    missing = [path for path in only if not any(k.endswith("/" + path) for k in manifests)]
    if missing:
        print(f"Error: could not find template {missing[0]} in chart", file=sys.stderr)
        return 1
    print("\n---\n".join(manifests[k] for k in shown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

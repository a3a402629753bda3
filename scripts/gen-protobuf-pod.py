#!/usr/bin/env python3
"""Writes crates/kubesim/src/protobuf/pod.rs and pod_volumes.rs: the JSON names of every
protobuf message a Pod is made of, so kubesim can turn a protobuf Pod into the JSON a JSON request
would carry. The messages only a volume uses (its many sources) go to pod_volumes.rs, the rest to
pod.rs, so that neither file is too long to read.

The field list of each message comes from k8s-pb (the prost types kubesim decodes with); the
JSON name of each field comes from k8s-openapi (whose serde code spells every name the API
uses, `clusterIP`, `hostPID`, `targetWWNs`...). Both are dependencies already, found through
`cargo metadata`, so the output follows the versions in Cargo.lock. Run from the repository root:

    python3 scripts/gen-protobuf-pod.py

It fails, naming the message and field, when a k8s-pb field has no k8s-openapi name.
"""

import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTPUT_DIR = ROOT / "crates" / "kubesim" / "src" / "protobuf"

# Messages whose JSON form is written by hand in protobuf/mod.rs (special encodings or shared
# with other kinds).
HAND_WRITTEN = {
    "meta::ObjectMeta", "meta::Time", "meta::MicroTime", "meta::FieldsV1", "meta::OwnerReference",
    "meta::ManagedFieldsEntry", "meta::Condition", "intstr::IntOrString", "resource::Quantity",
    "core::ObjectReference", "core::LocalObjectReference",
}

# k8s-pb module path -> (alias used in the generated code, k8s-openapi directory)
PACKAGES = {
    "api::core::v1": ("core", "api/core/v1"),
    "apimachinery::pkg::apis::meta::v1": ("meta", "apimachinery/pkg/apis/meta/v1"),
}


def crate_dir(metadata, name):
    for package in metadata["packages"]:
        if package["name"] == name:
            return pathlib.Path(package["manifest_path"]).parent
    sys.exit(f"{name} is not a dependency of this workspace")


def pb_messages(path):
    """struct name -> [(field, type text)] from a k8s-pb module."""
    text = path.read_text()
    messages = {}
    for match in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
        body = "\n".join(line for line in match.group(2).splitlines() if not line.strip().startswith("///"))
        fields = re.findall(r"#\[prost\([^\]]*\)\]\s*pub (r#\w+|\w+):\s*(.*?),\n", body + "\n", re.S)
        messages[match.group(1)] = [(name, re.sub(r"\s+", "", kind)) for name, kind in fields]
    return messages


def openapi_names(directory):
    """lower-cased struct name -> {rust field name: JSON name} from k8s-openapi's serde code."""
    names = {}
    for path in directory.glob("*.rs"):
        text = path.read_text()
        struct = re.search(r"pub struct (\w+) \{", text)
        if not struct:
            continue
        # Keyed without underscores: k8s-pb says `target_ww_ns` where k8s-openapi says
        # `target_wwns`, both for `targetWWNs`.
        pairs = dict((bare(rust), json_name) for json_name, rust in re.findall(r'"(\w+)" => Field::Key_(\w+),', text))
        names[struct.group(1).lower()] = pairs
    return names


def bare(rust_name):
    return rust_name.removeprefix("r#").rstrip("_").replace("_", "")


def message_type(kind):
    """The message a singular message field holds (`Option<VolumeSource>`), else None."""
    match = re.fullmatch(r"(?:::core::option::)?Option<(?:super::)*(?:[a-z_0-9]+::)*([A-Z]\w*)>", kind)
    return match.group(1) if match and match.group(1) != "String" else None


def referenced(kind, current):
    """(package alias, message) pairs a field type refers to; unqualified names are `current`'s."""
    found = []
    for path, name in re.findall(r"((?:super::)*(?:[a-z_0-9]+::)*)([A-Z]\w*)", kind):
        if name in ("Option", "Vec", "String", "BTreeMap"):
            continue
        package = current if not path.replace("super::", "") else "core"
        if "meta::v1" in path:
            package = "meta"
        elif "intstr" in path:
            package = "intstr"
        elif "resource" in path:
            package = "resource"
        found.append((package, name))
    return found


def main():
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    pb_root = crate_dir(metadata, "k8s-pb") / "src"
    openapi_root = crate_dir(metadata, "k8s-openapi") / "src"
    nodes = [n for n in metadata["resolve"]["nodes"] if "k8s-openapi" in n["id"]]
    enabled = sorted(f for node in nodes for f in node.get("features", []) if f.startswith("v1_"))
    if not enabled:
        sys.exit("k8s-openapi is built without a Kubernetes version feature")
    version_dir = openapi_root / enabled[-1]

    messages, names = {}, {}
    for module, (alias, openapi_dir) in PACKAGES.items():
        pb_path = pb_root.joinpath(*module.split("::")) / "mod.rs"
        messages[alias] = pb_messages(pb_path)
        names[alias] = openapi_names(version_dir / openapi_dir)

    queue, seen, order = [("core", "Pod")], set(), []
    while queue:
        key = queue.pop(0)
        qualified = f"{key[0]}::{key[1]}"
        if key in seen or qualified in HAND_WRITTEN:
            continue
        seen.add(key)
        package, message = key
        if package not in messages or message not in messages[package]:
            sys.exit(f"no k8s-pb message {qualified}")
        order.append(key)
        for _, kind in messages[package][message]:
            queue.extend(referenced(kind, package))

    # The messages reachable from the Pod without going through a Volume stay in pod.rs; the
    # others (volume sources and what only they use) go to pod_volumes.rs.
    outside_volumes, stack = set(), [("core", "Pod")]
    while stack:
        key = stack.pop()
        if key in outside_volumes or key not in seen or key == ("core", "Volume"):
            continue
        outside_volumes.add(key)
        for _, kind in messages[key[0]][key[1]]:
            stack.extend(referenced(kind, key[0]))
    files = {
        "pod.rs": ("Every message a Pod is made of but the volume sources", [k for k in order if k in outside_volumes]),
        "pod_volumes.rs": ("The messages of a Pod's volumes and what only they use", [k for k in order if k not in outside_volumes]),
    }
    # A message Go embeds inline has no JSON type of its own in k8s-openapi: its fields carry
    # the names they have in the embedding type.
    for package, message in order:
        for field, kind in messages[package][message]:
            embedded = message_type(kind)
            parent_names = names[package].get(message.lower(), {})
            if embedded and bare(field) not in parent_names and embedded.lower() not in names[package] \
                    and all(bare(inner) in parent_names for inner, _ in messages[package].get(embedded, [("?", "")])):
                names[package][embedded.lower()] = parent_names

    guessed = []
    for file_name, (what, keys) in files.items():
        emit(OUTPUT_DIR / file_name, what, keys, messages, names, guessed)
    for note in guessed:
        print(f"  name guessed (not in k8s-openapi): {note}")


def emit(output, what, keys, messages, names, guessed):
    """Writes one generated file with the messages `keys`, in that order."""
    lines = [
        "//! Generated by scripts/gen-protobuf-pod.py from k8s-pb's messages and k8s-openapi's JSON",
        f"//! names: do not edit. {what}, as Kubernetes JSON.",
        "//!",
        "//! Scalars keep their zeros: a Pod has many Go pointers whose zero is meaningful",
        "//! (`runAsUser: 0`, `terminationGracePeriodSeconds: 0`) and the wire does not say which.",
        "",
        "use k8s_pb::api::core::v1 as core;",
        "use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;",
        "use serde_json::{Map, Value};",
        "",
        "use super::{ToJson, is_zero};",
        "",
        "json_object! {",
    ]
    for package, message in keys:
        json_names = names[package].get(message.lower())
        if json_names is None:
            json_names = {}
            guessed.append(f"{package}::{message}: not in k8s-openapi, every name guessed")
        fields = []
        for field, kind in messages[package][message]:
            rust = field.removeprefix("r#")
            json_name = json_names.get(bare(rust))
            embedded = message_type(kind)
            if json_name is None and embedded and all(
                    bare(inner) in json_names for inner, _ in messages[package].get(embedded, [("?", "")])):
                # A Go struct embedded inline (`VolumeSource` in `Volume`): its fields are the
                # parent's in JSON.
                fields.append(f'{field}: "" keep')
                continue
            if json_name is None:
                # A field of another Kubernetes version (k8s-pb and k8s-openapi need not match):
                # protobuf names are the Go JSON names in snake case, so camel case is right for
                # all but irregular casings, which are listed for a reader to check.
                head, *rest = rust.split("_")
                json_name = head + "".join(word.title() for word in rest)
                guessed.append(f"{package}::{message}.{field} -> {json_name}")
            fields.append(f'{field}: "{json_name}" keep')
        lines.append(f"    {package}::{message} {{")
        for field in fields:
            lines.append(f"        {field},")
        lines.append("    }")
    lines.append("}")
    output.write_text("\n".join(lines) + "\n")
    subprocess.run(["rustfmt", "--edition", "2024", str(output)], check=True)
    print(f"wrote {output.relative_to(ROOT)}: {len(keys)} messages")


if __name__ == "__main__":
    main()

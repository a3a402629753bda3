#!/usr/bin/env bash
# Builds the express-operator container image with buildah (daemonless; vfs storage, no
# privileges needed for a FROM scratch build) and writes it as an OCI archive to
# target/image/express-operator.tar. Then runs `express-operator --version` from the image's own
# root filesystem (its loader and libraries only) to prove the image is complete.
#
#   scripts/image.sh [--profile release|dev | --from-test-build] [--tag TAG]
#
# release (the default) builds optimised binaries, dev unoptimised ones, both as shipped: the
# operator without its `dev` feature (no emulator), with jemalloc. --from-test-build builds
# nothing: it takes the debug binaries the workspace's test build left (the test command's; the
# operator there has the `dev` feature, which the tests unify), so that the test command proves
# the image is complete without compiling the dependencies a second time with other features
# (about 200 crates); its clippy phase checks the shipped features compile. Installs buildah from
# Debian's packages when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --from-test-build) profile=test-build; shift ;;
    --tag) tag="$2"; shift 2 ;;
    *) echo "image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
tag=${tag:-$version}

if ! command -v buildah >/dev/null 2>&1; then
  echo "== installing buildah (Debian package)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi

target_dir=${CARGO_TARGET_DIR:-target}
if [ "$profile" = test-build ]; then
  echo "== the binaries the test build left"
  bin_dir="$target_dir/debug"
  for binary in express-operator kubectl-express; do
    [ -x "$bin_dir/$binary" ] || { echo "image.sh: no $bin_dir/$binary: run the workspace's test build first" >&2; exit 1; }
  done
elif [ "$profile" = release ]; then
  echo "== building the binaries ($profile)"
  # express-operator without its default `dev` feature (no emulator in the shipped binary), with
  # its allocator.
  cargo build --release --no-default-features --features express-operator/jemalloc -p express-operator -p kubectl-express
  bin_dir="$target_dir/release"
else
  echo "== building the binaries ($profile)"
  cargo build --no-default-features --features express-operator/jemalloc -p express-operator -p kubectl-express
  bin_dir="$target_dir/debug"
fi

out=target/image
rootfs=$out/rootfs
# buildah's vfs storage keeps whole copies of the layer (the container, the committed layer, the
# archive), so a build needs several times the binaries' size free. A full disk shows up inside
# buildah only as "read/write on closed pipe"; say it plainly before starting instead.
mkdir -p "$out"
binaries_kib=$(du -kc "$bin_dir/express-operator" "$bin_dir/kubectl-express" | tail -n1 | cut -f1)
needed_kib=$((binaries_kib * 6 + 512 * 1024))
free_kib=$(df -Pk "$out" | awk 'NR == 2 {print $4}')
if [ "$free_kib" -lt "$needed_kib" ]; then
  echo "image.sh: $((free_kib / 1024)) MiB free where the image is built ($out), $((needed_kib / 1024)) MiB needed; free some disk and run again" >&2
  exit 1
fi
# Whatever happens below, leave no storage behind: it is large and only this run reads it.
trap 'rm -rf "$out/storage" "$out/run" "$out/check"' EXIT

rm -rf "$rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin_dir/express-operator" "$bin_dir/kubectl-express" "$rootfs/usr/local/bin/"
if [ "$profile" != release ]; then
  # The dev build's line tables are a third of its size and no use inside the image.
  strip --strip-debug "$rootfs"/usr/local/bin/*
fi

echo "== copying exactly the libraries the binaries load"
libraries() {
  # ldd prints "name => /path (addr)" for libraries and "/path (addr)" for the loader.
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
}
for binary in "$rootfs"/usr/local/bin/*; do
  for library in $(libraries "$binary"); do
    mkdir -p "$rootfs$(dirname "$library")"
    cp -L "$library" "$rootfs$library"
  done
done
printf 'root:x:0:0:root:/:/sbin/nologin\nexpress:x:65532:65532:express-operator:/:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nexpress:x:65532:\n' > "$rootfs/etc/group"

echo "== building the image"
storage=(--storage-driver vfs --root "$PWD/$out/storage" --runroot "$PWD/$out/run")
image="localhost/express-operator:$tag"
buildah "${storage[@]}" bud --isolation chroot --layers=false -f Containerfile -t "$image" "$rootfs" >/dev/null
rm -f "$out/express-operator.tar"
buildah "${storage[@]}" push "$image" "oci-archive:$out/express-operator.tar:$image" >/dev/null
buildah "${storage[@]}" rmi "$image" >/dev/null || true

echo "== running express-operator --version from the image's root filesystem"
check=$out/check
rm -rf "$check"
mkdir -p "$check/oci" "$check/rootfs"
tar -xf "$out/express-operator.tar" -C "$check/oci"
manifest=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); print(i["manifests"][0]["digest"].split(":")[1])' "$check/oci/index.json")
for layer in $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(" ".join(l["digest"].split(":")[1] for l in m["layers"]))' "$check/oci/blobs/sha256/$manifest"); do
  tar -xf "$check/oci/blobs/sha256/$layer" -C "$check/rootfs"
done
loader=""
for candidate in "$check"/rootfs/lib64/ld-linux-*.so.* "$check"/rootfs/lib/ld-linux-*.so.*; do
  if [ -e "$candidate" ]; then loader=${candidate#"$check/rootfs/"}; break; fi
done
[ -n "$loader" ] || { echo "image.sh: the image has no dynamic loader" >&2; exit 1; }
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null 2>&1; then
  # As root: run it inside the image's root filesystem, as the image's user.
  reported=$(chroot --userspec=65532:65532 "$check/rootfs" /usr/local/bin/express-operator --version)
  echo "$reported (chroot into the image, as 65532)"
  [ "$reported" = "express-operator $version" ] || { echo "image.sh: unexpected version output" >&2; exit 1; }
fi
# Also without privileges: the image's loader, told to load libraries from the image only.
library_path=$(cd "$check/rootfs" && find . -name '*.so*' -printf '%h\n' | sort -u | sed "s|^\.|$PWD/$check/rootfs|" | paste -sd:)
reported=$("$check/rootfs/$loader" --inhibit-cache --library-path "$library_path" \
  "$check/rootfs/usr/local/bin/express-operator" --version)
echo "$reported"
[ "$reported" = "express-operator $version" ] || { echo "image.sh: unexpected version output" >&2; exit 1; }
"$check/rootfs/$loader" --inhibit-cache --library-path "$library_path" \
  "$check/rootfs/usr/local/bin/kubectl-express" --version >/dev/null
user=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2]+"/"+m["config"]["digest"].split(":")[1])); print(c["config"]["User"])' "$check/oci/blobs/sha256/$manifest" "$check/oci/blobs/sha256")
[ "$user" = "65532:65532" ] || { echo "image.sh: the image runs as $user, not 65532" >&2; exit 1; }
echo "image: $out/express-operator.tar ($image, $(du -h "$out/express-operator.tar" | cut -f1)); runs as 65532"

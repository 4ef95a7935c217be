#!/usr/bin/env bash
# Builds the real Kubernetes CSI sidecars test/csi runs next to capvco-csi-driver, and links them
# into bin/: csi-provisioner, csi-attacher, csi-snapshotter and snapshot-controller. Each binary is
# cached per version outside the clone, like hack/toolchain.sh's and hack/external-dns.sh's.
#
#   hack/csi-sidecars.sh
#
# Each sidecar is built as the main module of its own source (its go.mod and go.sum), never as a
# dependency of this module, whose Kubernetes libraries are newer or older than theirs.
# external-provisioner is v6: the Go module proxy refuses .../external-provisioner/v5 (and v3, v4,
# and the unversioned path) with 403 "This module version is not available", as it refuses
# external-resizer and node-driver-registrar (test/csi plays the registrar itself). First build
# on a loaded 2-core machine: 12 + 4 + 16 + 0.5 minutes (external-snapshotter is on Kubernetes
# 0.37 libraries, the others on 0.36); cached afterwards.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
provisioner=${CSI_PROVISIONER_VERSION:-v6.4.0}
attacher=${CSI_ATTACHER_VERSION:-v4.13.0}
snapshotter=${CSI_SNAPSHOTTER_VERSION:-v8.7.0}
cache=${CAPX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capx}
mkdir -p "$cache/tools" "$root/bin"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
work=""
trap '[[ -z "$work" ]] || { chmod -R u+w "$work"; rm -rf "$work"; }' EXIT

# build <module> <version> <cmd directory> <binary name>
build() {
	local module=$1 version=$2 dir=$3 name=$4
	local out="$cache/tools/$name-$version"
	if [[ ! -x "$out" ]]; then
		local start=$SECONDS src
		src=$(go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[[ -n "$src" ]] || { echo "csi-sidecars.sh: go mod download found no source of $module@$version" >&2; exit 1; }
		work=$(mktemp -d)
		cp -r "$src/." "$work/"
		chmod -R u+w "$work"
		# external-snapshotter replaces its client module with ./client, a nested module that
		# its module zip leaves out: the client module of the same version is that folder.
		if grep -q '=> ./client' "$work/go.mod"; then
			local client
			client=$(go mod download -json "${module%/v8}/client/v8@$version" 2>/dev/null | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
			[[ -n "$client" ]] || { echo "csi-sidecars.sh: go mod download found no client module of $module@$version" >&2; exit 1; }
			mkdir -p "$work/client"
			cp -r "$client/." "$work/client/"
			chmod -R u+w "$work/client"
		fi
		echo "[csi-sidecars] building $name $version" >&2
		(cd "$work" && go build -trimpath -o "$out.tmp" "./$dir")
		chmod -R u+w "$work"
		rm -rf "$work"
		work=""
		mv "$out.tmp" "$out"
		echo "[csi-sidecars] $name built in $((SECONDS - start))s" >&2
	fi
	ln -sf "$out" "$root/bin/$name"
	echo "$root/bin/$name -> $out"
}

build github.com/kubernetes-csi/external-provisioner/v6 "$provisioner" cmd/csi-provisioner csi-provisioner
build github.com/kubernetes-csi/external-attacher/v4 "$attacher" cmd/csi-attacher csi-attacher
build github.com/kubernetes-csi/external-snapshotter/v8 "$snapshotter" cmd/csi-snapshotter csi-snapshotter
build github.com/kubernetes-csi/external-snapshotter/v8 "$snapshotter" cmd/snapshot-controller snapshot-controller

# The snapshot CRDs ship in the client module of the same version.
crds=$(go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/v8@$snapshotter" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
mkdir -p "$cache/tools/snapshot-crds-$snapshotter"
cp "$crds"/config/crd/snapshot.storage.k8s.io_*.yaml "$cache/tools/snapshot-crds-$snapshotter/"
chmod u+w "$cache/tools/snapshot-crds-$snapshotter"/*.yaml
ln -sfn "$cache/tools/snapshot-crds-$snapshotter" "$root/bin/snapshot-crds"
echo "$root/bin/snapshot-crds -> $cache/tools/snapshot-crds-$snapshotter"

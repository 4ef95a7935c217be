#!/usr/bin/env bash
# Builds the real external-dns (sigs.k8s.io/external-dns) for test/externaldns and links it as
# bin/external-dns; the binary is cached per version outside the clone, like hack/toolchain.sh's.
#
#   hack/external-dns.sh
#
# v0.20.0 is the newest release that builds here: v0.23.0 needs Go 1.27 and modules the Go module
# proxy does not serve (github.com/civo/civogo v0.7.3, github.com/exoscale/egoscale/v3 v3.1.50, a
# github.com/openshift/api pseudo-version). external-dns is built as the main module (its own
# go.mod and go.sum), because as a dependency its module graph needs vbom.ml/util, which the
# proxy does not serve either. It links every DNS provider's SDK: expect several minutes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${EXTERNAL_DNS_VERSION:-v0.20.0}
cache=${CAPX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capx}
out="$cache/tools/external-dns-$version"
mkdir -p "$cache/tools" "$root/bin"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

if [[ ! -x "$out" ]]; then
	start=$SECONDS
	src=$(go mod download -json "sigs.k8s.io/external-dns@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[[ -n "$src" ]] || { echo "external-dns.sh: go mod download found no source of sigs.k8s.io/external-dns@$version" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
	cp -r "$src/." "$work/"
	chmod -R u+w "$work"
	echo "[external-dns] building $version (several minutes)" >&2
	(cd "$work" && go build -trimpath -o "$out.tmp" .)
	mv "$out.tmp" "$out"
	echo "[external-dns] built in $((SECONDS - start))s" >&2
fi
ln -sf "$out" "$root/bin/external-dns"
"$root/bin/external-dns" --version >/dev/null 2>&1 || "$root/bin/external-dns" --help >/dev/null
echo "$root/bin/external-dns -> $out"

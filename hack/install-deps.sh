#!/usr/bin/env bash
# Installs the Debian packages the local management cluster (hack/cluster, test/localcluster) runs on:
# the container runtime, the CNI plugins, iptables for kube-proxy and kubelet, and iproute2 for the
# cluster's network namespace; MkDocs with the Material theme for the docs site (make docs); and
# unbound, the resolver test/mgmtdns runs under config/mgmt-dns.
# Idempotent: packages already installed are not fetched again, and
# nothing is done at all when every one is present. Needs root (CI and the dev machines run as root).
#
#   hack/install-deps.sh
#
# containerd is only installed, never started as a service here: the harness runs its own
# containerd per cluster, inside the cluster's network namespace.
set -euo pipefail

# e2fsprogs, xfsprogs and cryptsetup: the CSI driver's node tests format ext4/xfs and LUKS2 on loop
# devices (util-linux has losetup).
# openssl: the release's signatures are checked as a user without cosign would (hack/sign).
packages=(containerd runc containernetworking-plugins iptables iproute2 util-linux mkdocs mkdocs-material e2fsprogs xfsprogs cryptsetup openssl unbound)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "[install-deps] all present: ${packages[*]}" >&2
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "[install-deps] need root to install: ${missing[*]}" >&2
  exit 1
fi

echo "[install-deps] installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A stale package list makes apt fail on versions the mirror no longer has; refresh once per run.
apt-get update -qq
# policy-rc.d keeps the package scripts from starting a system containerd where an init system
# exists; the harness starts its own.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
trap 'if [[ $created_policy -eq 1 ]]; then rm -f "$policy"; fi' EXIT
apt-get install -y --no-install-recommends "${missing[@]}"
echo "[install-deps] done" >&2

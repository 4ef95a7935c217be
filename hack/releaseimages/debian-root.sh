#!/usr/bin/env bash
# Makes a Debian root file system of another architecture for hack/releaseimages' add-on images
# (the CSI driver's tools): the packages of the tools and the libraries they depend on, downloaded
# with apt from this machine's Debian sources for ARCH and extracted (nothing is installed and
# no package script runs), with a dpkg database (var/lib/dpkg: status and the file lists) that
# dpkg-query reads as it reads this machine's. apt's state for ARCH lives beside DIR, so the
# machine's own apt configuration is untouched.
#
#   hack/releaseimages/debian-root.sh ARCH DIR [PACKAGE...]
#
# Default packages: the CSI driver's tools (mount util-linux e2fsprogs xfsprogs cryptsetup-bin).
# DIR is made afresh; a DIR/.complete with the same request is reused as it is.
set -euo pipefail
if (($# < 2)); then
  echo "usage: hack/releaseimages/debian-root.sh ARCH DIR [PACKAGE...]" >&2
  exit 2
fi
arch=$1 dir=$2
shift 2
pkgs=("$@")
((${#pkgs[@]})) || pkgs=(mount util-linux e2fsprogs xfsprogs cryptsetup-bin)
sources=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null || true)
request="$arch ${pkgs[*]} $(sha256sum <<<"$sources" | cut -c1-16)"
if [[ -f $dir/.complete && $(cat "$dir/.complete") == "$request" ]]; then
  echo "[debian-root] $dir: already made for $request" >&2
  exit 0
fi

state=$dir.apt
rm -rf "$dir" "$state"
mkdir -p "$dir/var/lib/dpkg/info" "$state/lists/partial" "$state/archives/partial" "$state/debs"
: >"$state/status"
opts=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -o "Dir::State::Lists=$state/lists"
  -o "Dir::Cache=$state" -o "Dir::Cache::archives=$state/archives" -o "Dir::State::Status=$state/status"
  -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
echo "[debian-root] apt-get update for $arch (state in $state)" >&2
apt-get -qq "${opts[@]}" update
# The packages and everything they depend on; of the dependencies only the libraries matter (the
# images take the tools' ELF dependencies), so the rest (perl, python, debconf) is not fetched.
mapfile -t closure < <(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${pkgs[@]}" | grep -v '^[ <]' | sort -u)
want=("${pkgs[@]}")
for p in "${closure[@]}"; do
  case $p in lib*) want+=("$p") ;; esac
done
mapfile -t want < <(printf '%s\n' "${want[@]}" | sort -u)
echo "[debian-root] downloading ${#want[@]} packages for $arch: ${want[*]}" >&2
(cd "$state/debs" && apt-get -qq "${opts[@]}" download "${want[@]}")

status=$dir/var/lib/dpkg/status
: >"$status"
for deb in "$state"/debs/*.deb; do
  dpkg-deb -x "$deb" "$dir"
  name=$(dpkg-deb -f "$deb" Package)
  # One architecture in this database: file lists named without it (dpkg's format 0).
  dpkg-deb -f "$deb" | awk '{ print } /^Package:/ { print "Status: install ok installed" }' >>"$status"
  echo >>"$status"
  dpkg-deb -c "$deb" | awk '{ print substr($6, 2) }' | sed 's|/$||; s|^$|/.|' >"$dir/var/lib/dpkg/info/$name.list"
done
rm -rf "$state"
echo "$request" >"$dir/.complete"
echo "[debian-root] $dir: ${#want[@]} $arch packages" >&2

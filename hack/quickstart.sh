#!/usr/bin/env bash
# The quickstart: a local management cluster with Cluster API core, the capx providers, the
# whitesky.cloud simulator and sample clusters, built from this checkout with nothing downloaded
# but Go modules and Debian packages. Needs root. Details: docs/quickstart.md.
#
#   hack/quickstart.sh up        build what is missing, bring everything up, print clusterctl describe
#   hack/quickstart.sh down      remove it all (daemon logs stay; add --purge to drop the image caches)
#   hack/quickstart.sh status    clusterctl describe of the samples
#   hack/quickstart.sh images    only build the images (make images)
#
# Every step is idempotent: `up` on a running quickstart reuses the cluster, re-imports only
# changed images and rolls the manager when it changed. Extra flags go to the Go command
# (test/e2e/cmd/quickstart; `hack/quickstart.sh up --help`), e.g. `up --flow manifests`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CAPX_ROOT="$root" GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
# bin/quickstart reports how long `up` took from here, the toolchain build included.
export CAPX_QUICKSTART_STARTED="${CAPX_QUICKSTART_STARTED:-$(date +%s)}"
bin="$root/bin/quickstart"
log() { printf '\033[1m[quickstart]\033[0m %s\n' "$*" >&2; }

if [[ $# -eq 0 ]]; then set -- up; fi
cmd=$1

# The images and the test modules need tofu and the CAPI manager; the cluster needs the node
# binaries; the installs need kubectl and clusterctl. All are cached per machine after the first
# build (about 12 minutes on 2 cores from nothing; later runs only link them).
if [[ $cmd == up || $cmd == images ]]; then
  if [[ $(id -u) -ne 0 && $cmd == up ]]; then
    log "needs root (network namespaces, containerd, the kubelet)"; exit 1
  fi
  deps_pid=""
  if [[ $cmd == up ]]; then
    # apt waits on the network while the toolchain keeps the CPUs busy: both at once.
    mkdir -p "$root/_artifacts"
    deps_log="$root/_artifacts/install-deps.log"
    log "Debian packages (containerd, runc, CNI plugins, iptables) in the background; log: $deps_log"
    bash "$root/hack/install-deps.sh" >"$deps_log" 2>&1 &
    deps_pid=$!
  fi
  log "toolchain: etcd, Kubernetes, OpenTofu, clusterctl, the CAPI manager (built once per machine)"
  bash "$root/hack/toolchain.sh" etcd kube tofu clusterctl capi-manager   # all but controller-gen
  if [[ -n $deps_pid ]]; then
    if ! wait "$deps_pid"; then
      log "installing the Debian packages failed:"; tail -n 20 "$deps_log" >&2; exit 1
    fi
    tail -n 1 "$deps_log" >&2
  fi
fi

# (Re)build the command when its sources or the packages it drives changed.
if [[ ! -x $bin ]] || [[ -n $(find "$root/test" "$root/api" "$root/internal" "$root/go.mod" "$root/go.sum" \
    -newer "$bin" \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print -quit 2>/dev/null) ]]; then
  log "building bin/quickstart"
  # Same flags as the images and the CAPI tools, so it reuses their compiled packages.
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./test/e2e/cmd/quickstart)
fi
# The kubectl plugins the quickstart ends with (kubectl finds them on PATH, as after krew install).
if [[ $cmd == up || $cmd == status ]]; then
  log "building the kubectl plugins into bin/"
  (cd "$root" && make --no-print-directory build BINARIES="kubectl-captf kubectl-capvco capvco-gpucheck")
fi
exec "$bin" "$@"

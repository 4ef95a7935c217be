#!/usr/bin/env bash
# Builds the test toolchain from Go modules (nothing else can be downloaded on these machines) and
# caches every binary per version in a per-user folder outside the clone, linked into bin/.
#
#   hack/toolchain.sh            the tools the default test run needs (envtest + tofu + controller-gen)
#   hack/toolchain.sh all        everything, including the node parts and CAPI for e2e
#   hack/toolchain.sh TOOL...    just those tools; "kube" names the six Kubernetes binaries
#
# Idempotent: a tool whose cached binary exists is only linked. Builds print their progress and time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
source "$root/hack/versions.env"

cache=${CAPX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capx}
bin="$root/bin"
mkdir -p "$cache/tools" "$cache/src" "$bin" "$bin/envtest"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

kube_tools=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)
default_tools=(etcd kube-apiserver kube-controller-manager tofu controller-gen capi-manager)
all_tools=(etcd "${kube_tools[@]}" tofu controller-gen clusterctl capi-manager)

log() { printf '\033[1m[toolchain]\033[0m %s\n' "$*" >&2; }

version_of() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kube-*|kubelet|kubectl) echo "$KUBERNETES_VERSION" ;;
    tofu) echo "$OPENTOFU_VERSION" ;;
    clusterctl|capi-manager) echo "$CAPI_VERSION" ;;
    controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
    *) echo "unknown tool $1" >&2; return 1 ;;
  esac
}

# A throwaway module per tool family and version: a fresh go.mod each time (editing one version's
# go.mod into another keeps newer indirect dependencies through minimal version selection).
prepare_module() { # dir, module lines...
  local dir=$1; shift
  if [[ -f "$dir/.ready" ]]; then return; fi
  rm -rf "$dir"; mkdir -p "$dir"
  printf '%s\n' "$@" >"$dir/go.mod"
  touch "$dir/.ready"
}

kube_module() {
  local v=$KUBERNETES_VERSION dir="$cache/src/kubernetes-$KUBERNETES_VERSION"
  if [[ ! -f "$dir/.ready" ]]; then
    local gomod minor lines=()
    gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    minor=${v#v1.}
    while read -r m; do lines+=("replace $m => $m v0.$minor"); done \
      < <(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod")
    prepare_module "$dir" "module capx.local/kubetools" "go 1.26" "require k8s.io/kubernetes $v" "${lines[@]}"
  fi
  echo "$dir"
}

kube_ldflags() {
  local v=$1 major minor
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  local f=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    f+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "-s -w$f"
}

cached() { # tool -> path of its cached binary (which may not exist yet)
  local v
  v=$(version_of "$1")
  echo "$cache/tools/$1-$v/$1"
}

# resolve sets dir (the tool's throwaway module, prepared), pkg and ldflags for a tool.
resolve() {
  local tool=$1 v
  v=$(version_of "$tool")
  ldflags="-s -w"
  case "$tool" in
    etcd)
      dir="$cache/src/etcd-$v"
      prepare_module "$dir" "module capx.local/etcdtools" "go 1.26" "require go.etcd.io/etcd/server/v3 $v"
      pkg=go.etcd.io/etcd/server/v3 ;;
    kube-*|kubelet|kubectl)
      dir=$(kube_module)
      pkg=k8s.io/kubernetes/cmd/$tool
      ldflags=$(kube_ldflags "$v") ;;
    tofu)
      dir="$cache/src/opentofu-$v"
      if [[ ! -f "$dir/.ready" ]]; then
        local gomod hcl
        gomod=$(go mod download -json "github.com/opentofu/opentofu@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
        hcl=$(grep -E '^replace github.com/hashicorp/hcl/v2|^\s*github.com/hashicorp/hcl/v2 =>' "$gomod" | sed 's/^replace //' | head -n1)
        prepare_module "$dir" "module capx.local/tofutools" "go 1.26" "require github.com/opentofu/opentofu $v" \
          ${hcl:+"replace $hcl"}
      fi
      pkg=github.com/opentofu/opentofu/cmd/tofu
      ldflags="-s -w -X github.com/opentofu/opentofu/version.dev=no" ;;
    clusterctl|capi-manager)
      dir="$cache/src/cluster-api-$v"
      prepare_module "$dir" "module capx.local/capitools" "go 1.26" "require sigs.k8s.io/cluster-api $v" \
        "replace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api $v"
      ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$v -X sigs.k8s.io/cluster-api/version.gitMajor=1"
      ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMinor=${v#v1.}"
      if [[ $tool == clusterctl ]]; then pkg=sigs.k8s.io/cluster-api/cmd/clusterctl; else pkg=sigs.k8s.io/cluster-api/core; fi ;;
    controller-gen)
      dir="$cache/src/controller-tools-$v"
      prepare_module "$dir" "module capx.local/cgtools" "go 1.26" "require sigs.k8s.io/controller-tools $v"
      pkg=sigs.k8s.io/controller-tools/cmd/controller-gen ;;
  esac
}

# Downloading modules waits on the network, compiling on the CPUs: while one tool compiles, the
# modules of the ones after it download. prefetch starts one background download per module
# folder (a tool family: the Kubernetes binaries share one, clusterctl and the CAPI manager
# another); main waits for a folder's download before building in it, since two go commands
# must not edit one go.mod at once. A failed prefetch is not an error: the build downloads
# again and says what failed.
declare -A prefetching=()

family_of() {
  case "$1" in
    kube-*|kubelet|kubectl) echo kube ;;
    clusterctl|capi-manager) echo capi ;;
    *) echo "$1" ;;
  esac
}

prefetch() { # tools...
  local -A members=()
  local tool f
  for tool in "$@"; do
    [[ -x $(cached "$tool") ]] && continue
    f=$(family_of "$tool")
    members[$f]+="$tool "
  done
  for f in "${!members[@]}"; do
    (
      pkgs=()
      for tool in ${members[$f]}; do
        resolve "$tool" >/dev/null 2>&1 || exit 0
        pkgs+=("$pkg")
      done
      cd "$dir" && CGO_ENABLED=0 go list -mod=mod -deps "${pkgs[@]}" >/dev/null 2>&1 || true
    ) &
    prefetching[$f]=$!
  done
}

wait_prefetch() { # tool
  local f
  f=$(family_of "$1")
  if [[ -n ${prefetching[$f]:-} ]]; then
    wait "${prefetching[$f]}" 2>/dev/null || true
    unset "prefetching[$f]"
  fi
}

build() { # tool -> path of cached binary
  local tool=$1 v out dir pkg ldflags cgo=0
  v=$(version_of "$tool")
  out=$(cached "$tool")
  if [[ -x "$out" ]]; then echo "$out"; return; fi
  mkdir -p "$(dirname "$out")"
  resolve "$tool"
  log "building $tool $v (first time on this machine; cached afterwards)"
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  log "built $tool $v in $((SECONDS - start))s"
  echo "$out"
}

link() { # tool, cached path
  ln -sfn "$2" "$bin/$1"
  case "$1" in etcd|kube-apiserver|kube-controller-manager|kubectl) ln -sfn "$2" "$bin/envtest/$1" ;; esac
}

main() {
  # Groups expand wherever they appear ("kube etcd" means the kube tools and etcd).
  local tools=() a
  if [[ $# -eq 0 ]]; then set -- "${default_tools[@]}"; fi
  for a in "$@"; do
    case "$a" in
      all) tools+=("${all_tools[@]}") ;;
      kube) tools+=("${kube_tools[@]}") ;;
      *) version_of "$a" >/dev/null; tools+=("$a") ;;
    esac
  done
  local t p
  trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
  prefetch "${tools[@]}"
  for t in "${tools[@]}"; do
    wait_prefetch "$t"
    p=$(build "$t")
    link "$t" "$p"
  done
  log "ready: ${tools[*]} (cache: $cache)"
}

main "$@"

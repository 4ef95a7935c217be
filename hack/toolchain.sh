#!/usr/bin/env bash
# Builds the test toolchain from Go modules (nothing else can be downloaded on these machines) and
# caches every binary per version in a per-user folder outside the clone, linked into bin/.
#
#   hack/toolchain.sh            the tools the default test run needs (envtest, kubectl, clusterctl, tofu, controller-gen)
#   hack/toolchain.sh all        everything, including the node parts and CAPI for e2e
#   hack/toolchain.sh release    what `make release-snapshot` and `make release-test` need: goreleaser,
#                                krew and its manifest validator, kubectl, clusterctl, tofu (tofu-arm64
#                                too for a release of every platform: the module base image's
#                                linux/arm64 OpenTofu) and cosign (checks the signatures as users do)
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

host_arch=$(go env GOARCH)
kube_tools=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)
default_tools=(etcd kube-apiserver kube-controller-manager kubectl tofu controller-gen capi-manager clusterctl)
all_tools=(etcd "${kube_tools[@]}" tofu controller-gen clusterctl capi-manager)
release_tools=(goreleaser krew validate-krew-manifest kubectl clusterctl tofu cosign)

log() { printf '\033[1m[toolchain]\033[0m %s\n' "$*" >&2; }

version_of() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kube-*|kubelet|kubectl) echo "$KUBERNETES_VERSION" ;;
    tofu|tofu-arm64) echo "$OPENTOFU_VERSION" ;;
    clusterctl|capi-manager) echo "$CAPI_VERSION" ;;
    controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
    goreleaser) echo "$GORELEASER_VERSION" ;;
    krew|validate-krew-manifest) echo "$KREW_VERSION" ;;
    cosign) echo "$COSIGN_VERSION" ;;
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

# etcd builds inside the Kubernetes module when ETCD_VERSION is the etcd server version that
# Kubernetes itself requires: it then reuses most of the compiled packages (gRPC, protobuf, the
# etcd client) instead of compiling them a second time at other versions.
etcd_in_kube() {
  local mod
  mod=$(cd "$cache/src" && GOFLAGS=-mod=mod go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$KUBERNETES_VERSION" 2>/dev/null) || return 1
  grep -qE "^[[:space:]]*go.etcd.io/etcd/server/v3 $ETCD_VERSION( |$)" "$mod"
}

# A tool family is built by one go command in one module, so the binaries share its package
# loading and compile work and their links run side by side: the Kubernetes binaries (and etcd,
# see above), clusterctl with the CAPI manager; every other tool is a family of its own.
etcd_family=etcd
family_of() {
  case "$1" in
    kube-*|kubelet|kubectl) echo kube ;;
    etcd) echo "$etcd_family" ;;
    clusterctl|capi-manager) echo capi ;;
    krew|validate-krew-manifest) echo krew ;;
    *) echo "$1" ;;
  esac
}

# resolve sets dir (the family's module, prepared), pkg, ldflags and modflag for a tool.
resolve() {
  local tool=$1 v
  v=$(version_of "$tool")
  ldflags="-s -w"
  modflag=-mod=mod
  goarch=$host_arch
  case "$(family_of "$tool")/$tool" in
    kube/*)
      dir=$(kube_module)
      ldflags=$(kube_ldflags "$KUBERNETES_VERSION")
      if [[ $tool == etcd ]]; then pkg=go.etcd.io/etcd/server/v3; else pkg=k8s.io/kubernetes/cmd/$tool; fi ;;
    etcd/etcd)
      dir="$cache/src/etcd-$v"
      prepare_module "$dir" "module capx.local/etcdtools" "go 1.26" "require go.etcd.io/etcd/server/v3 $v"
      pkg=go.etcd.io/etcd/server/v3 ;;
    tofu/tofu|tofu-arm64/tofu-arm64)
      # tofu-arm64 is the same build for linux/arm64 (a cross-compile: the module is pure Go).
      if [[ $tool == tofu-arm64 ]]; then goarch=arm64; fi
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
    capi/*)
      # Built from this module (go.mod lists both as tools, at the CAPI_VERSION it requires), so
      # they share every compiled dependency with the manager and the test images.
      dir=$root
      modflag=-mod=readonly
      ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$v -X sigs.k8s.io/cluster-api/version.gitMajor=1"
      ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMinor=${v#v1.}"
      if [[ $tool == clusterctl ]]; then pkg=sigs.k8s.io/cluster-api/cmd/clusterctl; else pkg=sigs.k8s.io/cluster-api/core; fi ;;
    controller-gen/*)
      dir="$cache/src/controller-tools-$v"
      prepare_module "$dir" "module capx.local/cgtools" "go 1.26" "require sigs.k8s.io/controller-tools $v"
      pkg=sigs.k8s.io/controller-tools/cmd/controller-gen ;;
    goreleaser/*)
      dir="$cache/src/goreleaser-$v"
      prepare_module "$dir" "module capx.local/goreleasertools" "go 1.26" "require github.com/goreleaser/goreleaser/v2 $v"
      pkg=github.com/goreleaser/goreleaser/v2
      ldflags="-s -w -X main.version=${v#v} -X main.builtBy=capx-toolchain" ;;
    cosign/*)
      # A module of its own: cosign's dependencies (sigstore, TUF, cloud KMS clients) stay out of
      # this module's go.sum.
      dir="$cache/src/cosign-$v"
      prepare_module "$dir" "module capx.local/cosigntools" "go 1.26" "require github.com/sigstore/cosign/v3 $v"
      pkg=github.com/sigstore/cosign/v3/cmd/cosign
      ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$v" ;;
    krew/*)
      # krew's own go.mod (go 1.17) pins the dependencies it was released with; a module of its
      # own keeps them from mixing with this module's Kubernetes libraries.
      dir="$cache/src/krew-$v"
      prepare_module "$dir" "module capx.local/krewtools" "go 1.26" "require sigs.k8s.io/krew $v"
      pkg=sigs.k8s.io/krew/cmd/$tool
      ldflags="-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$v -X sigs.k8s.io/krew/internal/version.gitCommit=$v" ;;
  esac
}

# Downloading modules waits on the network, compiling on the CPUs: while one family compiles,
# the modules of the ones after it download. prefetch starts one background download per family;
# main waits for a family's download before building it, since two go commands must not edit one
# go.mod at once. The package list it prints is kept for the build's progress lines. A failed
# prefetch is not an error: the build downloads again and says what failed.
declare -A prefetching=()

# missing groups the tools whose binary is not cached yet: family -> "tool tool ".
declare -A missing=()
declare -a family_order=()
plan() { # tools...
  local tool f
  for tool in "$@"; do
    [[ -x $(cached "$tool") ]] && continue
    f=$(family_of "$tool")
    if [[ -z ${missing[$f]:-} ]]; then family_order+=("$f"); fi
    [[ " ${missing[$f]:-} " == *" $tool "* ]] || missing[$f]+="$tool "
  done
}

deps_file() { echo "$cache/logs/$1.deps"; } # family -> its package list, written by prefetch

prefetch() {
  local f
  mkdir -p "$cache/logs"
  for f in "${family_order[@]}"; do
    (
      pkgs=()
      for tool in ${missing[$f]}; do
        resolve "$tool" >/dev/null 2>&1 || exit 0
        pkgs+=("$pkg")
      done
      cd "$dir" && CGO_ENABLED=0 GOARCH=$goarch go list "$modflag" -deps "${pkgs[@]}" >"$(deps_file "$f")" 2>/dev/null ||
        rm -f "$(deps_file "$f")"
    ) &
    prefetching[$f]=$!
  done
}

wait_prefetch() { # family
  if [[ -n ${prefetching[$1]:-} ]]; then
    wait "${prefetching[$1]}" 2>/dev/null || true
    unset "prefetching[$1]"
  fi
}

# go build -o DIR/ names each binary after its package's last path element, or the one before a
# major-version suffix (go.etcd.io/etcd/server/v3 -> server).
out_name() {
  local base=${1##*/}
  if [[ $base =~ ^v[0-9]+$ ]]; then base=${1%/*}; base=${base##*/}; fi
  echo "$base"
}

# build_family compiles the family's missing tools in one go command and moves each binary into
# its cache folder. Every 30 s it says how far the compile is (packages compiled so far against
# the packages the tools need, some of which may be compiled already).
build_family() { # family
  local f=$1 tools=() pkgs=() tool out_dir logf total start ticker rc=0
  read -r -a tools <<<"${missing[$f]}"
  for tool in "${tools[@]}"; do resolve "$tool"; pkgs+=("$pkg"); done
  out_dir="$cache/tmp/$f.$$"
  logf="$cache/logs/$f.log"
  rm -rf "$out_dir"; mkdir -p "$out_dir" "$cache/logs"
  if [[ ! -s $(deps_file "$f") ]]; then # the prefetch failed: list again, or show "?"
    (cd "$dir" && CGO_ENABLED=0 GOARCH=$goarch go list "$modflag" -deps "${pkgs[@]}" >"$(deps_file "$f")" 2>/dev/null) ||
      rm -f "$(deps_file "$f")"
  fi
  total="?"
  if [[ -s $(deps_file "$f") ]]; then total=$(wc -l <"$(deps_file "$f")"); fi
  log "building ${tools[*]} (first time on this machine; cached afterwards; $total packages; log: $logf)"
  start=$SECONDS
  : >"$logf"
  (
    while sleep 30; do
      log "  $f: $(grep -cE '^[[:alnum:]._~/-]+$' "$logf" || true)/$total packages compiled, $((SECONDS - start))s"
    done
  ) &
  ticker=$!
  # In the background and waited for, so that a signal's trap runs at once (bash defers traps
  # until a foreground command ends) and its cleanup stops the build.
  (cd "$dir" && CGO_ENABLED=0 GOARCH=$goarch exec go build "$modflag" -v -trimpath -ldflags "$ldflags" -o "$out_dir/" "${pkgs[@]}") \
    2>>"$logf" &
  wait "$!" || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    log "building ${tools[*]} failed; the compiler said:"
    grep -vE '^[[:alnum:]._~/-]+$' "$logf" | tail -n 40 >&2
    rm -rf "$out_dir"
    return "$rc"
  fi
  local i
  for i in "${!tools[@]}"; do
    mkdir -p "$(dirname "$(cached "${tools[$i]}")")"
    mv "$out_dir/$(out_name "${pkgs[$i]}")" "$(cached "${tools[$i]}")"
  done
  rm -rf "$out_dir"
  log "built ${tools[*]} in $((SECONDS - start))s"
}

link() { # tool, cached path
  relink "$2" "$bin/$1"
  case "$1" in etcd|kube-apiserver|kube-controller-manager|kubectl) relink "$2" "$bin/envtest/$1" ;; esac
}

# relink points link at target, leaving a link that already does alone: the lanes link the
# tools they share while other lanes' tests run them, and ln -sf replaces a link by removing it
# first.
relink() { # target, link
  [[ $(readlink "$2" 2>/dev/null) == "$1" ]] || ln -sfn "$1" "$2"
}

# shellcheck source=hugepages.sh
source "$root/hack/hugepages.sh"

main() {
  # Groups expand wherever they appear ("kube etcd" means the kube tools and etcd).
  local tools=() a f t
  if [[ $# -eq 0 ]]; then set -- "${default_tools[@]}"; fi
  for a in "$@"; do
    case "$a" in
      all) tools+=("${all_tools[@]}") ;;
      release) tools+=("${release_tools[@]}") ;;
      kube) tools+=("${kube_tools[@]}") ;;
      *) version_of "$a" >/dev/null; tools+=("$a") ;;
    esac
  done
  # Every way out stops the background work and puts the kernel setting back: the signals exit
  # through the EXIT trap (a SIGINT sent to this shell alone would otherwise let it carry on).
  trap 'kill $(jobs -p) 2>/dev/null || true; restore_huge_pages' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  if [[ " ${tools[*]} " == *" etcd "* ]] && [[ ! -x $(cached etcd) ]] && etcd_in_kube; then etcd_family=kube; fi
  plan "${tools[@]}"
  prefetch
  if [[ ${#family_order[@]} -gt 0 ]]; then huge_pages_for_build; fi
  for f in "${family_order[@]}"; do
    wait_prefetch "$f"
    build_family "$f"
  done
  restore_huge_pages
  for t in "${tools[@]}"; do link "$t" "$(cached "$t")"; done
  log "ready: ${tools[*]} (cache: $cache)"
}

main "$@"

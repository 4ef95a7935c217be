#!/usr/bin/env bash
# Transparent huge pages while hack/toolchain.sh compiles the test tools. The compiler faults in a
# lot of fresh memory: in a VM each 4 KiB page fault is expensive, and with transparent huge
# pages only on request ("madvise", which Go's runtime never makes) a cold build spends a quarter
# of its time in the kernel. Switching them to "always" for the build measured etcd at 66 s
# instead of 97 s on a 2-core VM.
#
# It is a machine-wide kernel setting, so it is only ever changed by the toolchain build (never
# by a release build), only as root, only from "madvise", and always put back: toolchain.sh
# restores it on every way out, an error, SIGINT, SIGTERM and SIGHUP included (hack/toolchaintest
# proves each). CAPX_BUILD_THP=0 leaves the setting alone.
#
#   source hack/hugepages.sh     defines huge_pages_for_build and restore_huge_pages
#
# CAPX_THP_FILE replaces the sysfs file, for the test.
thp_file=${CAPX_THP_FILE:-/sys/kernel/mm/transparent_hugepage/enabled}
thp_restore=""

huge_pages_for_build() {
  [[ ${CAPX_BUILD_THP:-1} == 1 && -w $thp_file ]] || return 0
  [[ $(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp_file") == madvise ]] || return 0
  if echo always >"$thp_file" 2>/dev/null; then
    thp_restore=madvise
    printf '\033[1m[build]\033[0m %s\n' "transparent huge pages set to \"always\" while compiling (faster builds; back to \"madvise\" afterwards; CAPX_BUILD_THP=0 to skip)" >&2
  fi
}

restore_huge_pages() {
  if [[ -n $thp_restore ]]; then echo "$thp_restore" >"$thp_file" 2>/dev/null || true; thp_restore=""; fi
}

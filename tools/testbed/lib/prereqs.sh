# shellcheck shell=bash
# The host packages the test bed needs, installed from Debian's repositories before any long
# build starts, so that a fresh machine never fails twenty minutes in for a package missing at
# second one. Each entry: a check (a command, or a file a package ships) and the package.

# PREREQS: "check package why" triples. A check starting with / is a file, otherwise a command.
PREREQS=(
  "/usr/sbin/dockerd docker.io Docker engine: kind, CAPD machines, image builds"
  "iptables iptables Docker's and kind's network rules"
  "debootstrap debootstrap the Debian root filesystems of the node and base images"
  "jq jq JSON of go list, docker inspect and daemon.json"
  "/bin/busybox busybox-static the shell tools of the local-path helper and the flannel CNI image"
  "/usr/include/seccomp.h libseccomp-dev runc's seccomp support (cgo)"
  "pkg-config pkg-config runc's cgo flags for libseccomp"
  "gcc gcc cgo builds (runc, containerd, flanneld) and the pause binary"
  "git git the test bed's git server repositories"
  "file file checking that built binaries are static"
  "curl curl readiness checks of the registry and the git server"
)

prereq_present() {
  local check=$1
  if [[ $check == /* ]]; then [[ -e $check ]]; else command -v "$check" >/dev/null 2>&1; fi
}

# prereqs_install: install every missing package in one apt-get run, saying what and why.
prereqs_install() {
  local entry check pkg why missing=()
  for entry in "${PREREQS[@]}"; do
    read -r check pkg why <<<"$entry"
    if ! prereq_present "$check"; then
      log "missing $check: package $pkg ($why)"
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "host packages: all present"
    return 0
  fi
  [[ $(id -u) == 0 ]] || die "packages missing (${missing[*]}) and not root: install them with apt-get install ${missing[*]}"
  command -v apt-get >/dev/null 2>&1 || die "packages missing (${missing[*]}) and no apt-get: this test bed expects Debian"
  log "installing: ${missing[*]}"
  local out
  out=$CACHE/logs/apt-$(date +%Y%m%d-%H%M%S).log
  mkdir -p "$CACHE/logs"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$out" 2>&1; then
    tail -n 20 "$out" >&2
    die "apt-get install ${missing[*]} failed (log: $out)"
  fi
  for entry in "${PREREQS[@]}"; do
    read -r check pkg why <<<"$entry"
    prereq_present "$check" || die "package $pkg installed but $check is still missing"
  done
  log "installed: ${missing[*]}"
}

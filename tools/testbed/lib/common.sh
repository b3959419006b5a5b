# shellcheck shell=bash
# shellcheck disable=SC2034 # globals used by the scripts that source this file
# Shared helpers of the test bed scripts: paths, versions, logging, step timing, hashing,
# Go module lookups. Sourced by every script; defines functions and variables only.

# Command substitutions fail like the commands they run.
shopt -s inherit_errexit

TESTBED_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$TESTBED_DIR/../.." && pwd)
CACHE=${CLUSTER_INIT_CACHE:-$HOME/.cache/cluster-init}

# Label carried by every image the test bed builds: the hash of everything that went into
# it. An image whose label matches is not rebuilt.
INPUT_HASH_LABEL=io.cluster-init.testbed.input-hash

# ---------------------------------------------------------------------------------------
# Logging. Everything goes to stderr so that functions can return values on stdout.

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { log "WARNING: $*"; }
die() {
  log "ERROR: $*"
  exit 1
}

# Seconds as "1m23s" or "45s".
fmt_duration() {
  local s=$1
  if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# step NAME CMD [ARGS...]: run CMD as one named, timed step of the run. The duration is
# logged and appended to $TB_TIMINGS (tab-separated) for the final summary. CMD runs under
# errexit like the rest of the script (not in an `||` context, which would switch errexit
# off inside it): a failure ends the script, and step_failed (EXIT trap) names the step.
STEP_NAME="" STEP_START=0
step() {
  STEP_NAME=$1 STEP_START=$SECONDS
  shift
  log "==> $STEP_NAME"
  "$@"
  local took=$((SECONDS - STEP_START))
  log "<== $STEP_NAME done in $(fmt_duration "$took")"
  if [[ -n ${TB_TIMINGS:-} ]]; then printf '%s\t%s\n' "$took" "$STEP_NAME" >>"$TB_TIMINGS"; fi
  STEP_NAME=""
}

step_failed() {
  if [[ -n $STEP_NAME ]]; then log "<== $STEP_NAME FAILED after $(fmt_duration $((SECONDS - STEP_START))) (see above)"; fi
}

# ---------------------------------------------------------------------------------------
# Environment.

# tb_init: find go, load the pinned versions, create the cache layout.
tb_init() {
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    PATH=/usr/local/go/bin:$PATH
  fi
  command -v go >/dev/null 2>&1 || die "go not found in PATH"
  load_versions
  mkdir -p "$CACHE"/{bin,src,logs,tmp,rootfs,images,envtest,tools}
  # Never let a wrapper module switch to a downloaded toolchain: none can be downloaded here,
  # and a silent switch would change every cache key anyway.
  export GOTOOLCHAIN=local
  GO_VERSION=$(go env GOVERSION)
}

# load_versions: source tools/versions.env, the project's pins (plain KEY=value lines).
load_versions() {
  local f=$REPO_ROOT/tools/versions.env
  [[ -f $f ]] || die "missing $f"
  set -a
  # shellcheck disable=SC1090 # KEY=value pins, not a script whose definitions need following
  source "$f"
  set +a
}

# require_vars NAME...: fail early with a clear message when a pin is missing.
require_vars() {
  local v
  for v in "$@"; do [[ -n ${!v:-} ]] || die "$v is not set (tools/versions.env)"; done
}

# ---------------------------------------------------------------------------------------
# Hashing.

# hash_strings STR...: short, stable hash of the arguments.
hash_strings() { printf '%s\0' "$@" | sha256sum | cut -c1-16; }

# hash_tree PATH...: hash of file names, modes, link targets and contents below the paths.
hash_tree() {
  local p
  for p in "$@"; do
    (cd "$p" && find . \( -type f -o -type l \) -printf '%p %m %l\n' | LC_ALL=C sort &&
      find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
  done | sha256sum | cut -c1-16
}

# hash_functions NAME...: hash of the source of shell functions, so that changing how
# something is built changes its cache key.
hash_functions() { declare -f "$@" | sha256sum | cut -c1-16; }

# ---------------------------------------------------------------------------------------
# Go modules.

# mod_download MODULE VERSION: `go mod download -json` of one exact version (the module
# proxy here often refuses version lists, so nothing is ever resolved by query).
mod_download() {
  local json
  if ! json=$(cd "$CACHE/tmp" && go mod download -json "$1@$2" 2>&1); then
    die "cannot download $1@$2: $(jq -r '.Error // empty' <<<"$json" 2>/dev/null || printf '%s' "$json")"
  fi
  printf '%s\n' "$json"
}

# mod_dir MODULE VERSION: directory of MODULE@VERSION in the module cache.
mod_dir() { mod_download "$1" "$2" | jq -r .Dir; }

# mod_info MODULE VERSION JQPATH: a field of the module's .info (.Time, .Origin.Hash), or "".
mod_info() {
  local info
  info=$(mod_download "$1" "$2" | jq -r '.Info // empty')
  [[ -n $info ]] || return 0
  jq -r "$3 // empty" "$info"
}

# goconst DIR NAME...: values of string constants declared in the Go package in DIR.
goconst() {
  local bin
  bin=$CACHE/tools/goconst-$(hash_tree "$TESTBED_DIR/goconst")-$GO_VERSION
  if [[ ! -x $bin ]]; then
    (cd "$TESTBED_DIR/goconst" && go build -trimpath -o "$bin.tmp" .) && mv "$bin.tmp" "$bin"
  fi
  "$bin" "$@"
}

# shellcheck shell=bash
# Go builds through wrapper modules, cached by key.
#
# A wrapper module is a throwaway module that requires the program's module at an exact
# version, carries the replace directives the program needs (its own go.mod's replaces do
# not apply to a dependency, and local ./staging or ../api replaces must become published
# versions), and lists the programs as `tool` directives so that `go mod tidy` keeps them.
# Binaries land in $CACHE/bin/<key>/, where the key covers the module versions, the wrapper,
# the build flags and the Go version: an existing binary is never rebuilt.

# go_wrapper NAME BODY [GOSUM...]: create (once) the wrapper module NAME whose go.mod holds
# BODY after the module and go lines; print its directory. BODY holds require/replace/tool
# directives. The GOSUM files (the upstream modules' go.sum) seed the wrapper's go.sum: the
# checksum database has no entry for some dependencies (it answers 404), and the hashes the
# upstream project recorded are the ones to check them against anyway.
go_wrapper() {
  local name=$1 body=$2
  shift 2
  local goline
  goline="go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/').0"
  local dir
  dir=$CACHE/src/$name-$(hash_strings "$goline" "$body")
  if [[ ! -f $dir/.tidy-done ]]; then
    mkdir -p "$dir"
    printf 'module cluster-init.testbed/%s\n\n%s\n\n%s\n' "$name" "$goline" "$body" >"$dir/go.mod"
    local f seeds=()
    for f in "$@"; do if [[ -f $f ]]; then seeds+=("$f"); fi; done
    if ((${#seeds[@]})); then LC_ALL=C sort -u "${seeds[@]}" >"$dir/go.sum"; fi
    log "    resolving wrapper module $name (go mod tidy)"
    # -e: tidy also resolves the test imports of the tools' packages, and some of those
    # modules are refused by the module proxy here; they are not needed to build.
    if ! (cd "$dir" && go mod tidy -e >"$CACHE/logs/tidy-$name.log" 2>&1); then
      tail -n 30 "$CACHE/logs/tidy-$name.log" >&2
      die "go mod tidy failed for wrapper $name (log: $CACHE/logs/tidy-$name.log)"
    fi
    # Every package the tools need must now resolve and verify ("tool" is the pattern of
    # the go.mod tool directives); otherwise the wrapper is not kept.
    if ! (cd "$dir" && go list -deps tool >/dev/null 2>>"$CACHE/logs/tidy-$name.log"); then
      grep -v '^go: downloading' "$CACHE/logs/tidy-$name.log" | tail -n 30 >&2
      die "wrapper $name does not resolve (log: $CACHE/logs/tidy-$name.log)"
    fi
    touch "$dir/.tidy-done"
  fi
  printf '%s\n' "$dir"
}

# replaces_of GOMOD [VERSION]: the replace directives of an upstream go.mod as single lines
# "replace OLD => NEW [V]", with local-path replaces (./api, ../pkg) turned into the
# published module at VERSION, or, without VERSION, at the version GOMOD requires.
replaces_of() {
  local gomod=$1 localver=${2:-}
  awk '
    /^replace[ \t]*\(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    block && NF { sub(/\/\/.*/, ""); if (NF) print "replace " $0; next }
    /^replace[ \t]/ { sub(/\/\/.*/, ""); print }
  ' "$gomod" | while read -r _ old a b c d; do
    # forms: "old => new ver", "old ver => new ver", "old => ./path"
    local lhs new ver
    if [[ $a == "=>" ]]; then lhs=$old new=$b ver=$c; else lhs="$old $a" new=$c ver=$d; fi
    if [[ $new == ./* || $new == ../* ]]; then
      ver=$localver
      [[ -n $ver ]] || ver=$(required_version "$gomod" "$old")
      # A local replace of a module nothing requires is a guard (etcd v3.6:
      # go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY): without the tree it means nothing.
      [[ -n $ver ]] || continue
      printf 'replace %s => %s %s\n' "$old" "$old" "$ver"
    else
      printf 'replace %s => %s %s\n' "$lhs" "$new" "$ver"
    fi
  done
}

# required_version GOMOD MODULE: the version GOMOD requires of MODULE.
required_version() {
  awk -v m="$2" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}

# bin_key COMPONENT VERSION PARTS...: cache key of a set of binaries.
bin_key() {
  local component=$1 version=$2
  shift 2
  printf '%s-%s-%s\n' "$component" "$version" "$(hash_strings "$GO_VERSION" "$@")"
}

# go_bin WRAPDIR KEY BIN PKG [GO BUILD ARGS...]: build PKG into $CACHE/bin/KEY/BIN unless it
# is there. Environment (CGO_ENABLED, GOFLAGS) comes from the caller.
go_bin() {
  local wrapdir=$1 key=$2 bin=$3 pkg=$4
  shift 4
  local out=$CACHE/bin/$key/$bin
  if [[ -x $out ]]; then
    log "    $bin: cached ($key)"
    return 0
  fi
  mkdir -p "$CACHE/bin/$key"
  local logf=$CACHE/logs/build-$key-$bin.log start=$SECONDS
  log "    $bin: building $pkg"
  if ! (cd "$wrapdir" && go build -trimpath "$@" -o "$out.tmp" "$pkg") >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    die "build of $bin failed (log: $logf)"
  fi
  mv "$out.tmp" "$out"
  log "    $bin: built in $(fmt_duration $((SECONDS - start))) ($(du -h "$out" | cut -f1))"
}

# link_tool NAME TARGET: stable entry point $CACHE/tools/bin/NAME for a built binary.
link_tool() {
  mkdir -p "$CACHE/tools/bin"
  ln -sfn "$2" "$CACHE/tools/bin/$1"
}

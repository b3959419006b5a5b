# shellcheck shell=bash
# shellcheck disable=SC2034 # the *_BIN globals are used by lib/images.sh and lib/node.sh
# Binaries of everything except Kubernetes and etcd (lib/k8s.sh). Each build_* function
# builds into $CACHE/bin/<key>/ and sets <NAME>_BIN to that directory. Build flags follow
# the upstream release builds (Makefiles and Dockerfiles in the modules): CGO only where
# upstream uses it, version stamps where the program reports its version.

# wrapper_for NAME MODULE VERSION LOCALVER TOOL... : wrapper module requiring MODULE@VERSION
# with MODULE's own replace directives (local ones pointing at LOCALVER, or at the required
# versions when LOCALVER is empty) and the given tool packages; prints its directory.
wrapper_for() {
  local name=$1 module=$2 version=$3 localver=$4
  shift 4
  local dir body t
  dir=$(mod_dir "$module" "$version")
  body="require $module $version"$'\n\n'"$(replaces_of "$dir/go.mod" "$localver")"$'\n'
  for t in "$@"; do body+=$'\n'"tool $t"; done
  go_wrapper "$name" "$body" "$dir/go.sum"
}

# The Go components built alike, one line each: a wrapper module (wrapper_for) requiring the
# module at its pin with the binaries' packages as its tools, one cache key (bin_key) for the
# binaries, and one go build of each (go_bin). Columns, between "|":
#   name      the component: build_components' argument, the first part of the cache key and
#             the wrapper module's name (unless options give another)
#   module    the Go module
#   pins      the variable of its version (tools/versions.env), then any other pin the build
#             needs; build_components requires them all before it builds anything
#   variable  set to the binaries' directory, $CACHE/bin/<key>
#   key tag   the last part of the cache key; it starts with cgoN: CGO_ENABLED=N for each binary
#             that gives no other
#   options   "-" or words: nosumdb (the checksum database has no entry for the module: it is
#             added to GONOSUMDB), link (link_tool each binary), wrapper=NAME (the wrapper's name)
#   go flags  "-" or the go build flags before -ldflags; the words after -tags are its one argument
#   binaries  BIN:PKG[:CGO]... with PKG relative to the module ("." is its root); in this order
#             they are the wrapper's tools and the builds
#   ldflags   {m} stands for the module, {VAR} for the value of VAR, {VAR#v} for it without a
#             leading v
COMPONENTS=(
  # name                | module                                            | pins                                   | variable           | key tag          | options           | go flags                                        | binaries | ldflags
  #
  # Node runtime (build_runtime; kind's base image builds the same). containerd and ctr with cgo
  # like containerd's Makefile; the shim is always static there. runc needs cgo (libseccomp,
  # nsenter); its version comes from its embedded VERSION file. Of the CNI plugins kind ships
  # host-local, loopback, ptp and portmap; bridge is added because the flannel CNI plugin
  # delegates to it.
  'containerd             | github.com/containerd/containerd/v2               | CONTAINERD_VERSION CONTAINERD_REVISION | CONTAINERD_BIN     | cgo1-shim-cgo0   | -                 | -tags no_aufs no_btrfs no_devmapper no_zfs      | containerd:cmd/containerd ctr:cmd/ctr containerd-shim-runc-v2:cmd/containerd-shim-runc-v2:0 | -s -w -X {m}/version.Version={CONTAINERD_VERSION} -X {m}/version.Revision={CONTAINERD_REVISION} -X {m}/version.Package={m}'
  'runc                   | github.com/opencontainers/runc                    | RUNC_VERSION RUNC_COMMIT               | RUNC_BIN           | cgo1-pie-seccomp | -                 | -buildmode=pie -tags seccomp urfave_cli_no_docs | runc:. | -X main.gitCommit={RUNC_COMMIT}'
  'cni-plugins            | github.com/containernetworking/plugins            | CNI_PLUGINS_VERSION                    | CNI_BIN            | cgo0             | -                 | -                                               | host-local:plugins/ipam/host-local loopback:plugins/main/loopback ptp:plugins/main/ptp bridge:plugins/main/bridge portmap:plugins/meta/portmap | -s -w -X {m}/pkg/utils/buildversion.BuildVersion={CNI_PLUGINS_VERSION}'
  'crictl                 | sigs.k8s.io/cri-tools                             | CRICTL_VERSION                         | CRICTL_BIN         | cgo0             | wrapper=cri-tools | -                                               | crictl:cmd/crictl | -s -w -X {m}/pkg/version.Version={CRICTL_VERSION}'
  # CoreDNS (image tag checked against kubeadm's default in build-images). COREDNS_COMMIT may be
  # empty (not known for KUBERNETES_PREVIOUS_COREDNS_VERSION): CoreDNS then reports no commit,
  # nothing reads it.
  'coredns                | github.com/coredns/coredns                        | COREDNS_VERSION                        | COREDNS_BIN        | cgo0             | -                 | -                                               | coredns:. | -s -w -X {m}/coremain.GitCommit={COREDNS_COMMIT}'
  # kind's storage provisioner.
  'local-path-provisioner | github.com/rancher/local-path-provisioner         | LOCAL_PATH_PROVISIONER_VERSION         | LPP_BIN            | cgo0             | -                 | -                                               | local-path-provisioner:. | -s -w -X main.VERSION={LOCAL_PATH_PROVISIONER_VERSION}'
  # cert-manager controller, webhook, cainjector, plus acmesolver and ctl, whose images the
  # chart references too (HTTP-01 solver pods, the startupapicheck job).
  'cert-manager           | github.com/cert-manager/cert-manager              | CERT_MANAGER_VERSION                   | CERT_MANAGER_BIN   | cgo0             | -                 | -                                               | controller:cmd/controller webhook:cmd/webhook cainjector:cmd/cainjector acmesolver:cmd/acmesolver ctl:cmd/ctl | -s -w -X {m}/pkg/util.AppVersion={CERT_MANAGER_VERSION}'
  # flanneld (with cgo on amd64 like upstream: the UDP backend needs it) and the flannel CNI
  # plugin. The plugin's current module (flannel-io/cni-plugin) is not served by the module
  # proxy here, so it is built from its original upstream source, plugins/meta/flannel of
  # containernetworking/plugins at FLANNEL_CNI_PLUGIN_SOURCE_VERSION (tools/versions.env).
  'flannel                | github.com/flannel-io/flannel                     | FLANNEL_VERSION                        | FLANNEL_BIN        | cgo1             | nosumdb           | -                                               | flanneld:. | -s -w -X {m}/pkg/version.Version={FLANNEL_VERSION}'
  'flannel-cni-plugin     | github.com/containernetworking/plugins            | FLANNEL_CNI_PLUGIN_SOURCE_VERSION      | FLANNEL_CNI_BIN    | cgo0             | -                 | -                                               | flannel:plugins/meta/flannel | -s -w -X {m}/pkg/utils/buildversion.BuildVersion={FLANNEL_CNI_PLUGIN_SOURCE_VERSION}'
  # metrics-server, as its Makefile builds it (static, version stamps of k8s.io/component-base).
  'metrics-server         | sigs.k8s.io/metrics-server                        | METRICS_SERVER_VERSION                 | METRICS_SERVER_BIN | cgo0             | nosumdb           | -                                               | metrics-server:cmd/metrics-server | -s -w -X k8s.io/component-base/version.gitVersion={METRICS_SERVER_VERSION}'
  # The OCI registry (distribution).
  'registry               | github.com/distribution/distribution/v3           | REGISTRY_VERSION                       | REGISTRY_BIN       | cgo0             | -                 | -                                               | registry:cmd/registry | -s -w -X {m}/version.version={REGISTRY_VERSION#v} -X {m}/version.mainpkg={m}'
  # kind itself (for the tests that create clusters from the node image).
  'kind                   | sigs.k8s.io/kind                                  | KIND_VERSION                           | KIND_BIN           | cgo0             | link              | -                                               | kind:. | -s -w'
  # The providers of the OpenStack and RKE2 environments, as their Makefiles build them (static,
  # the version stamped where upstream stamps it from git): CAPO, ORC (the OpenStack resources
  # CAPO's machines use) and the RKE2 bootstrap and control plane providers (CAPRKE2). RKE2
  # itself is not built: its module is refused by the module proxy here.
  'capo                   | sigs.k8s.io/cluster-api-provider-openstack        | CAPO_VERSION                           | CAPO_BIN           | cgo0             | nosumdb           | -                                               | manager:. | -s -w -X {m}/version.gitVersion={CAPO_VERSION}'
  'orc                    | github.com/k-orc/openstack-resource-controller/v2 | ORC_VERSION                            | ORC_BIN            | cgo0             | nosumdb           | -                                               | manager:cmd/manager | -s -w -X {m}/internal/version.gitVersion={ORC_VERSION}'
  'caprke2                | github.com/rancher/cluster-api-provider-rke2      | CAPRKE2_VERSION                        | CAPRKE2_BIN        | cgo0             | -                 | -                                               | rke2-bootstrap:bootstrap rke2-control-plane:controlplane | -s -w -X {m}/version.gitVersion={CAPRKE2_VERSION}'
  # The object store of the backups: SeaweedFS's weed, static as its release builds are.
  'seaweedfs              | github.com/seaweedfs/seaweedfs                    | SEAWEEDFS_VERSION                      | SEAWEEDFS_BIN      | cgo0             | -                 | -                                               | weed:weed | -s -w'
)

build_runtime() { build_components containerd runc cni-plugins crictl; }
build_coredns() { build_components coredns; }
build_local_path_provisioner() { build_components local-path-provisioner; }
build_cert_manager() { build_components cert-manager; }
build_flannel() { build_components flannel flannel-cni-plugin; }
build_metrics_server() { build_components metrics-server; }
build_registry() { build_components registry; }
build_kind() { build_components kind; }
build_capo() { build_components capo; }
build_orc() { build_components orc; }
build_caprke2() { build_components caprke2; }
build_seaweedfs() { build_components seaweedfs; }

# build_components NAME...: build these components of COMPONENTS, in this order, once every pin
# they need is known to be set.
build_components() {
  local name module pins variable tag options flags binaries ldflags c p all=()
  for c in "$@"; do
    component_row "$c"
    read -ra p <<<"$pins"
    all+=("${p[@]}")
  done
  require_vars "${all[@]}"
  for c in "$@"; do build_component "$c"; done
}

# build_component NAME: build the binaries of NAME's line of COMPONENTS (see above).
build_component() {
  local name module pins variable tag options flags binaries ldflags
  component_row "$1"
  local pin=${pins%% *} version wrapper=$name nosumdb=false link=false cgo opt spec bin pkg bcgo i wrap key ld
  local words=() goflags=() bins=() pkgs=() cgos=()
  version=${!pin}
  [[ $tag =~ ^cgo([01]) ]] || die "component $name: key tag $tag does not start with cgo0 or cgo1"
  cgo=${BASH_REMATCH[1]}
  read -ra words <<<"$options"
  for opt in "${words[@]}"; do
    case $opt in
      -) ;;
      nosumdb) nosumdb=true ;;
      link) link=true ;;
      wrapper=*) wrapper=${opt#wrapper=} ;;
      *) die "component $name: unknown option $opt" ;;
    esac
  done
  if [[ $flags == *"-tags "* ]]; then
    read -ra goflags <<<"${flags%%-tags *}"
    goflags+=(-tags "${flags#*-tags }")
  elif [[ $flags != - ]]; then
    read -ra goflags <<<"$flags"
  fi
  read -ra words <<<"$binaries"
  for spec in "${words[@]}"; do
    IFS=: read -r bin pkg bcgo <<<"$spec"
    if [[ $pkg == . ]]; then pkg=$module; else pkg=$module/$pkg; fi
    bins+=("$bin") pkgs+=("$pkg") cgos+=("${bcgo:-$cgo}")
  done

  if $nosumdb; then export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$module; fi
  wrap=$(wrapper_for "$wrapper" "$module" "$version" "" "${pkgs[@]}")
  component_ldflags "$ldflags" "$module"
  ld=$REPLY
  key=$(bin_key "$name" "$version" "$(basename "$wrap")" "$ld" "$tag")
  printf -v "$variable" '%s' "$CACHE/bin/$key"
  for i in "${!bins[@]}"; do
    CGO_ENABLED=${cgos[i]} go_bin "$wrap" "$key" "${bins[i]}" "${pkgs[i]}" "${goflags[@]}" -ldflags "$ld"
  done
  if $link; then
    for bin in "${bins[@]}"; do link_tool "$bin" "$CACHE/bin/$key/$bin"; done
  fi
}

# component_row NAME: the columns of NAME's line of COMPONENTS, trimmed, into the caller's
# variables name module pins variable tag options flags binaries ldflags (bash scopes
# dynamically: the caller declares them local).
component_row() {
  local line col
  for line in "${COMPONENTS[@]}"; do
    IFS='|' read -r name module pins variable tag options flags binaries ldflags <<<"$line"
    for col in name module pins variable tag options flags binaries ldflags; do read -r "${col?}" <<<"${!col}"; done
    if [[ $name == "$1" ]]; then return 0; fi
  done
  die "no component $1 in COMPONENTS (lib/components.sh)"
}

# component_ldflags TEMPLATE MODULE: the ldflags column with its {m}, {VAR} and {VAR#v}
# replaced, in REPLY.
component_ldflags() {
  local rest=$1 module=$2 re='^([^{]*)\{([A-Za-z_][A-Za-z0-9_]*)(#v)?\}(.*)$' before ref strip value
  REPLY=""
  while [[ $rest =~ $re ]]; do
    before=${BASH_REMATCH[1]} ref=${BASH_REMATCH[2]} strip=${BASH_REMATCH[3]} rest=${BASH_REMATCH[4]}
    if [[ $ref == m ]]; then
      value=$module
    elif [[ -v $ref ]]; then
      value=${!ref}
    else
      die "$ref is not set (tools/versions.env)"
    fi
    if [[ -n $strip ]]; then value=${value#v}; fi
    REPLY+=$before$value
  done
  REPLY+=$rest
}

# component_binaries NAME ARRAY: the names of the binaries of NAME's line of COMPONENTS, into
# the array variable ARRAY.
component_binaries() {
  local name module pins variable tag options flags binaries ldflags spec words=()
  component_row "$1"
  local -n into=$2
  into=()
  read -ra words <<<"$binaries"
  for spec in "${words[@]}"; do into+=("${spec%%:*}"); done
}

# The cert-manager commands, of which lib/images.sh makes one image each.
CERT_MANAGER_COMMANDS=()
component_binaries cert-manager CERT_MANAGER_COMMANDS

# pause: the C program of the Kubernetes release (build/pause/linux/pause.c), static, as its
# Makefile builds it. $1: the version kubeadm expects (constants.PauseVersion).
build_pause() {
  local version=$1 src key
  src=$(mod_dir k8s.io/kubernetes "$KUBERNETES_VERSION")/build/pause/linux/pause.c
  key=$(bin_key pause "$version" "$(sha256sum <"$src")" "$(gcc -dumpfullversion)")
  PAUSE_BIN=$CACHE/bin/$key
  if [[ -x $PAUSE_BIN/pause ]]; then
    log "    pause: cached ($key)"
    return 0
  fi
  mkdir -p "$PAUSE_BIN"
  gcc -Os -Wall -Werror -static -DVERSION="v$version" -o "$PAUSE_BIN/pause.tmp" "$src"
  strip "$PAUSE_BIN/pause.tmp"
  mv "$PAUSE_BIN/pause.tmp" "$PAUSE_BIN/pause"
  log "    pause: built"
}

# Flux controllers. Each wrapper carries the replaces of the controller's go.mod; the
# source-controller also needs an older fluxcd/pkg/artifact module (FLUX_ARTIFACT_VERSION,
# tools/versions.env), because the version its go.mod asks for is not served here.
build_flux() {
  require_vars FLUX_SOURCE_CONTROLLER_VERSION FLUX_KUSTOMIZE_CONTROLLER_VERSION FLUX_HELM_CONTROLLER_VERSION \
    FLUX_NOTIFICATION_CONTROLLER_VERSION FLUX_ARTIFACT_VERSION
  local c v wrap key m extra
  for c in source-controller kustomize-controller helm-controller notification-controller; do
    case $c in
      source-controller) v=$FLUX_SOURCE_CONTROLLER_VERSION ;;
      kustomize-controller) v=$FLUX_KUSTOMIZE_CONTROLLER_VERSION ;;
      helm-controller) v=$FLUX_HELM_CONTROLLER_VERSION ;;
      notification-controller) v=$FLUX_NOTIFICATION_CONTROLLER_VERSION ;;
    esac
    m=github.com/fluxcd/$c
    extra=""
    if [[ $c == source-controller ]]; then
      extra="replace github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact $FLUX_ARTIFACT_VERSION"
    fi
    local dir body
    dir=$(mod_dir "$m" "$v")
    body="require $m $v"$'\n\n'"$(replaces_of "$dir/go.mod")"$'\n'"$extra"$'\n\n'"tool $m"
    wrap=$(go_wrapper "flux-$c" "$body" "$dir/go.sum")
    key=$(bin_key "flux-$c" "$v" "$(basename "$wrap")" "-s -w" cgo0)
    case $c in
      source-controller) FLUX_SOURCE_BIN=$CACHE/bin/$key ;;
      kustomize-controller) FLUX_KUSTOMIZE_BIN=$CACHE/bin/$key ;;
      helm-controller) FLUX_HELM_BIN=$CACHE/bin/$key ;;
      notification-controller) FLUX_NOTIFICATION_BIN=$CACHE/bin/$key ;;
    esac
    # Upstream: CGO_ENABLED=0 go build -trimpath -a (no version stamps).
    CGO_ENABLED=0 go_bin "$wrap" "$key" "$c" "$m" -ldflags "-s -w"
  done
}

# Cluster API core, kubeadm bootstrap and control plane managers, and CAPD (from the
# sigs.k8s.io/cluster-api/test module), in one wrapper whose local replaces point at
# CLUSTER_API_VERSION.
build_capi() {
  require_vars CLUSTER_API_VERSION CAPD_VERSION
  local m=sigs.k8s.io/cluster-api t=sigs.k8s.io/cluster-api/test
  local dir body wrap key ld p commit date minor core=$m/core
  dir=$(mod_dir "$t" "$CAPD_VERSION")
  # The core manager moved from the module's root to core/ in v1.14 (its config too:
  # tools/vendor-components capiProvider).
  [[ -f $(mod_dir "$m" "$CLUSTER_API_VERSION")/core/main.go ]] || core=$m
  body=$(
    printf 'require (\n\t%s %s\n\t%s %s\n)\n\n' "$m" "$CLUSTER_API_VERSION" "$t" "$CAPD_VERSION"
    replaces_of "$dir/go.mod" "$CLUSTER_API_VERSION"
    printf '\ntool (\n'
    printf '\t%s\n' "$m/bootstrap/kubeadm" "$m/controlplane/kubeadm" "$core" "$t/infrastructure/docker"
    printf ')\n'
  )
  wrap=$(go_wrapper cluster-api "$body" "$dir/go.sum" "$(mod_dir "$m" "$CLUSTER_API_VERSION")/go.sum")
  commit=$(mod_info "$m" "$CLUSTER_API_VERSION" .Origin.Hash)
  date=$(mod_info "$m" "$CLUSTER_API_VERSION" .Time)
  minor=${CLUSTER_API_VERSION#v1.}
  minor=${minor%%.*}
  p=$m/version
  ld="-s -w -X $p.gitVersion=$CLUSTER_API_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ld+=" -X $p.gitCommit=$commit -X $p.buildDate=$date"
  key=$(bin_key cluster-api "$CLUSTER_API_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CAPI_BIN=$CACHE/bin/$key
  # Same base name (kubeadm) twice: one -o per binary. Tags as in the upstream Dockerfile.
  CGO_ENABLED=0 go_bin "$wrap" "$key" core "$core" -tags fieldsv1string -ldflags "$ld"
  CGO_ENABLED=0 go_bin "$wrap" "$key" kubeadm-bootstrap "$m/bootstrap/kubeadm" -tags fieldsv1string -ldflags "$ld"
  CGO_ENABLED=0 go_bin "$wrap" "$key" kubeadm-control-plane "$m/controlplane/kubeadm" -tags fieldsv1string -ldflags "$ld"
  CGO_ENABLED=0 go_bin "$wrap" "$key" capd "$t/infrastructure/docker" -ldflags "$ld"
}

# own_program NAME: a program of this repository (tools/testbed/NAME), static, cached by its
# sources; REPLY is the directory of its binary.
own_program() {
  local name=$1 key
  key=$name-$(hash_strings "$GO_VERSION" "$(hash_tree "$TESTBED_DIR/$name")")
  REPLY=$CACHE/bin/$key
  if [[ ! -x $REPLY/$name ]]; then
    mkdir -p "$REPLY"
    (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$REPLY/$name" "./tools/testbed/$name")
  fi
}

# The test bed's git server: git's git-http-backend behind basic authentication.
build_git_server() {
  own_program gitserver
  GIT_SERVER_BIN=$REPLY
}

# The application the placement test places: an HTTP server that says which cluster it runs on.
build_hello() {
  own_program hello
  HELLO_BIN=$REPLY
}

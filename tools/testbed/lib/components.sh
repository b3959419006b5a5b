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

# Node runtime: containerd, runc, CNI plugins, crictl (kind's base image builds the same).
build_runtime() {
  require_vars CONTAINERD_VERSION CONTAINERD_REVISION RUNC_VERSION RUNC_COMMIT CNI_PLUGINS_VERSION CRICTL_VERSION
  local m wrap key ld

  m=github.com/containerd/containerd/v2
  wrap=$(wrapper_for containerd "$m" "$CONTAINERD_VERSION" "" "$m/cmd/containerd" "$m/cmd/ctr" "$m/cmd/containerd-shim-runc-v2")
  ld="-s -w -X $m/version.Version=$CONTAINERD_VERSION -X $m/version.Revision=$CONTAINERD_REVISION -X $m/version.Package=$m"
  key=$(bin_key containerd "$CONTAINERD_VERSION" "$(basename "$wrap")" "$ld" cgo1-shim-cgo0)
  CONTAINERD_BIN=$CACHE/bin/$key
  # containerd and ctr with cgo like containerd's Makefile; the shim is always static there.
  local tags="no_aufs no_btrfs no_devmapper no_zfs"
  CGO_ENABLED=1 go_bin "$wrap" "$key" containerd "$m/cmd/containerd" -tags "$tags" -ldflags "$ld"
  CGO_ENABLED=1 go_bin "$wrap" "$key" ctr "$m/cmd/ctr" -tags "$tags" -ldflags "$ld"
  CGO_ENABLED=0 go_bin "$wrap" "$key" containerd-shim-runc-v2 "$m/cmd/containerd-shim-runc-v2" -tags "$tags" -ldflags "$ld"

  m=github.com/opencontainers/runc
  wrap=$(wrapper_for runc "$m" "$RUNC_VERSION" "" "$m")
  ld="-X main.gitCommit=$RUNC_COMMIT"
  key=$(bin_key runc "$RUNC_VERSION" "$(basename "$wrap")" "$ld" cgo1-pie-seccomp)
  RUNC_BIN=$CACHE/bin/$key
  # runc needs cgo (libseccomp, nsenter); the version comes from its embedded VERSION file.
  CGO_ENABLED=1 go_bin "$wrap" "$key" runc "$m" -buildmode=pie -tags "seccomp urfave_cli_no_docs" -ldflags "$ld"

  m=github.com/containernetworking/plugins
  local plugins=(plugins/ipam/host-local plugins/main/loopback plugins/main/ptp plugins/main/bridge plugins/meta/portmap)
  local p tools=()
  for p in "${plugins[@]}"; do tools+=("$m/$p"); done
  wrap=$(wrapper_for cni-plugins "$m" "$CNI_PLUGINS_VERSION" "" "${tools[@]}")
  ld="-s -w -X $m/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
  key=$(bin_key cni-plugins "$CNI_PLUGINS_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CNI_BIN=$CACHE/bin/$key
  # kind ships host-local, loopback, ptp and portmap; bridge is added because the flannel
  # CNI plugin delegates to it.
  for p in "${plugins[@]}"; do
    CGO_ENABLED=0 go_bin "$wrap" "$key" "$(basename "$p")" "$m/$p" -ldflags "$ld"
  done

  m=sigs.k8s.io/cri-tools
  wrap=$(wrapper_for cri-tools "$m" "$CRICTL_VERSION" "" "$m/cmd/crictl")
  ld="-s -w -X $m/pkg/version.Version=$CRICTL_VERSION"
  key=$(bin_key crictl "$CRICTL_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CRICTL_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" crictl "$m/cmd/crictl" -ldflags "$ld"
}

# CoreDNS (image tag checked against kubeadm's default in build-images).
build_coredns() {
  # COREDNS_COMMIT may be empty (not known for KUBERNETES_PREVIOUS_COREDNS_VERSION): CoreDNS then
  # reports no commit, nothing reads it.
  require_vars COREDNS_VERSION
  local m=github.com/coredns/coredns wrap key ld
  wrap=$(wrapper_for coredns "$m" "$COREDNS_VERSION" "" "$m")
  ld="-s -w -X $m/coremain.GitCommit=$COREDNS_COMMIT"
  key=$(bin_key coredns "$COREDNS_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  COREDNS_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" coredns "$m" -ldflags "$ld"
}

# kind's storage provisioner.
build_local_path_provisioner() {
  require_vars LOCAL_PATH_PROVISIONER_VERSION
  local m=github.com/rancher/local-path-provisioner wrap key ld
  wrap=$(wrapper_for local-path-provisioner "$m" "$LOCAL_PATH_PROVISIONER_VERSION" "" "$m")
  ld="-s -w -X main.VERSION=$LOCAL_PATH_PROVISIONER_VERSION"
  key=$(bin_key local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  LPP_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" local-path-provisioner "$m" -ldflags "$ld"
}

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

# cert-manager controller, webhook, cainjector, plus acmesolver and ctl, whose images the
# chart references too (HTTP-01 solver pods, the startupapicheck job).
CERT_MANAGER_COMMANDS=(controller webhook cainjector acmesolver ctl)
build_cert_manager() {
  require_vars CERT_MANAGER_VERSION
  local m=github.com/cert-manager/cert-manager wrap key ld c tools=()
  for c in "${CERT_MANAGER_COMMANDS[@]}"; do tools+=("$m/cmd/$c"); done
  wrap=$(wrapper_for cert-manager "$m" "$CERT_MANAGER_VERSION" "" "${tools[@]}")
  ld="-s -w -X $m/pkg/util.AppVersion=$CERT_MANAGER_VERSION"
  key=$(bin_key cert-manager "$CERT_MANAGER_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CERT_MANAGER_BIN=$CACHE/bin/$key
  for c in "${CERT_MANAGER_COMMANDS[@]}"; do
    CGO_ENABLED=0 go_bin "$wrap" "$key" "$c" "$m/cmd/$c" -ldflags "$ld"
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

# flanneld (with cgo on amd64 like upstream: the UDP backend needs it) and the flannel CNI
# plugin. The plugin's current module (flannel-io/cni-plugin) is not served by the module
# proxy here, so it is built from its original upstream source, plugins/meta/flannel of
# containernetworking/plugins at FLANNEL_CNI_PLUGIN_SOURCE_VERSION (tools/versions.env).
build_flannel() {
  require_vars FLANNEL_VERSION FLANNEL_CNI_PLUGIN_SOURCE_VERSION
  local m=github.com/flannel-io/flannel wrap key ld
  # The checksum database has no entry for this module.
  export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$m
  wrap=$(wrapper_for flannel "$m" "$FLANNEL_VERSION" "" "$m")
  ld="-s -w -X $m/pkg/version.Version=$FLANNEL_VERSION"
  key=$(bin_key flannel "$FLANNEL_VERSION" "$(basename "$wrap")" "$ld" cgo1)
  FLANNEL_BIN=$CACHE/bin/$key
  CGO_ENABLED=1 go_bin "$wrap" "$key" flanneld "$m" -ldflags "$ld"

  m=github.com/containernetworking/plugins
  wrap=$(wrapper_for flannel-cni-plugin "$m" "$FLANNEL_CNI_PLUGIN_SOURCE_VERSION" "" "$m/plugins/meta/flannel")
  ld="-s -w -X $m/pkg/utils/buildversion.BuildVersion=$FLANNEL_CNI_PLUGIN_SOURCE_VERSION"
  key=$(bin_key flannel-cni-plugin "$FLANNEL_CNI_PLUGIN_SOURCE_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  FLANNEL_CNI_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" flannel "$m/plugins/meta/flannel" -ldflags "$ld"
}

# metrics-server, as its Makefile builds it (static, version stamps of k8s.io/component-base).
build_metrics_server() {
  require_vars METRICS_SERVER_VERSION
  local m=sigs.k8s.io/metrics-server wrap key ld
  # The checksum database has no entry for this version of the module.
  export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$m
  wrap=$(wrapper_for metrics-server "$m" "$METRICS_SERVER_VERSION" "" "$m/cmd/metrics-server")
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$METRICS_SERVER_VERSION"
  key=$(bin_key metrics-server "$METRICS_SERVER_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  METRICS_SERVER_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" metrics-server "$m/cmd/metrics-server" -ldflags "$ld"
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

# The OCI registry (distribution).
build_registry() {
  require_vars REGISTRY_VERSION
  local m=github.com/distribution/distribution/v3 wrap key ld
  wrap=$(wrapper_for registry "$m" "$REGISTRY_VERSION" "" "$m/cmd/registry")
  ld="-s -w -X $m/version.version=${REGISTRY_VERSION#v} -X $m/version.mainpkg=$m"
  key=$(bin_key registry "$REGISTRY_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  REGISTRY_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" registry "$m/cmd/registry" -ldflags "$ld"
}

# kind itself (for the tests that create clusters from the node image).
build_kind() {
  require_vars KIND_VERSION
  local m=sigs.k8s.io/kind wrap key
  wrap=$(wrapper_for kind "$m" "$KIND_VERSION" "" "$m")
  key=$(bin_key kind "$KIND_VERSION" "$(basename "$wrap")" "-s -w" cgo0)
  KIND_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" kind "$m" -ldflags "-s -w"
  link_tool kind "$KIND_BIN/kind"
}

# The providers of the OpenStack and RKE2 environments, as their Makefiles build them (static,
# the version stamped where upstream stamps it from git): CAPO, ORC (the OpenStack resources
# CAPO's machines use) and the RKE2 bootstrap and control plane providers (CAPRKE2). RKE2 itself
# is not built: its module is refused by the module proxy here.
build_capo() {
  require_vars CAPO_VERSION
  local m=sigs.k8s.io/cluster-api-provider-openstack wrap key ld
  # The checksum database has no entry for this version of the module.
  export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$m
  wrap=$(wrapper_for capo "$m" "$CAPO_VERSION" "" "$m")
  ld="-s -w -X $m/version.gitVersion=$CAPO_VERSION"
  key=$(bin_key capo "$CAPO_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CAPO_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" manager "$m" -ldflags "$ld"
}

build_orc() {
  require_vars ORC_VERSION
  local m=github.com/k-orc/openstack-resource-controller/v2 wrap key ld
  # The checksum database has no entry for this module.
  export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$m
  wrap=$(wrapper_for orc "$m" "$ORC_VERSION" "" "$m/cmd/manager")
  ld="-s -w -X $m/internal/version.gitVersion=$ORC_VERSION"
  key=$(bin_key orc "$ORC_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  ORC_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" manager "$m/cmd/manager" -ldflags "$ld"
}

build_caprke2() {
  require_vars CAPRKE2_VERSION
  local m=github.com/rancher/cluster-api-provider-rke2 wrap key ld
  wrap=$(wrapper_for caprke2 "$m" "$CAPRKE2_VERSION" "" "$m/bootstrap" "$m/controlplane")
  ld="-s -w -X $m/version.gitVersion=$CAPRKE2_VERSION"
  key=$(bin_key caprke2 "$CAPRKE2_VERSION" "$(basename "$wrap")" "$ld" cgo0)
  CAPRKE2_BIN=$CACHE/bin/$key
  CGO_ENABLED=0 go_bin "$wrap" "$key" rke2-bootstrap "$m/bootstrap" -ldflags "$ld"
  CGO_ENABLED=0 go_bin "$wrap" "$key" rke2-control-plane "$m/controlplane" -ldflags "$ld"
}

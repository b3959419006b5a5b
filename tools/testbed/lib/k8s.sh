# shellcheck shell=bash
# Kubernetes and etcd binaries (also the envtest assets).

K8S_COMMANDS=(kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)

# k8s_prepare: set K8S_WRAP (wrapper module dir), K8S_KEY (cache key), K8S_LDFLAGS.
# k8s.io/kubernetes replaces every k8s.io/<staging> module with ./staging/src/...; the
# wrapper replaces each with the published v0.<minor>.<patch> of the same release.
k8s_prepare() {
  [[ -z ${K8S_WRAP:-} ]] || return 0
  # KUBERNETES_COMMIT may be empty (not known for KUBERNETES_PREVIOUS_VERSION): the stamp is then
  # empty too; kubeadm and Cluster API read the version, never the commit.
  require_vars KUBERNETES_VERSION
  local mod staging body c
  mod=$(mod_dir k8s.io/kubernetes "$KUBERNETES_VERSION")
  staging="v0.${KUBERNETES_VERSION#v1.}"
  body="require k8s.io/kubernetes $KUBERNETES_VERSION"$'\n\n'
  body+=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print "replace " $1 " => " $1 " '"$staging"'" }' "$mod/go.mod")
  body+=$'\n\n'
  for c in "${K8S_COMMANDS[@]}"; do body+="tool k8s.io/kubernetes/cmd/$c"$'\n'; done
  K8S_WRAP=$(go_wrapper kubernetes "$body" "$mod/go.sum")

  # Version stamps as the release build sets them (hack/lib/version.sh); the build date is
  # the release's tag time recorded by the module proxy.
  local date minor p
  date=$(mod_info k8s.io/kubernetes "$KUBERNETES_VERSION" .Time)
  minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  K8S_LDFLAGS="-s -w"
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    K8S_LDFLAGS+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    K8S_LDFLAGS+=" -X $p.gitCommit=$KUBERNETES_COMMIT -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  K8S_KEY=$(bin_key kubernetes "$KUBERNETES_VERSION" "$(basename "$K8S_WRAP")" "$K8S_LDFLAGS" cgo0)
  K8S_BIN=$CACHE/bin/$K8S_KEY
}

# build_k8s [COMMAND...]: build Kubernetes commands (default: all of K8S_COMMANDS).
build_k8s() {
  k8s_prepare
  local c cmds=("$@")
  ((${#cmds[@]})) || cmds=("${K8S_COMMANDS[@]}")
  for c in "${cmds[@]}"; do
    CGO_ENABLED=0 go_bin "$K8S_WRAP" "$K8S_KEY" "$c" "k8s.io/kubernetes/cmd/$c" -ldflags "$K8S_LDFLAGS"
  done
  link_tool kubectl "$K8S_BIN/kubectl"
}

# build_etcd: etcd server. Its module (go.etcd.io/etcd/server/v3, a main package) replaces
# its sibling modules with ../ paths: the wrapper uses their published versions.
build_etcd() {
  require_vars ETCD_VERSION
  local mod body wrap ldflags
  mod=$(mod_dir go.etcd.io/etcd/server/v3 "$ETCD_VERSION")
  body="require go.etcd.io/etcd/server/v3 $ETCD_VERSION"$'\n\n'"$(replaces_of "$mod/go.mod")"$'\n\n'"tool go.etcd.io/etcd/server/v3"
  wrap=$(go_wrapper etcd "$body" "$mod/go.sum")
  ldflags="-s -w"
  ETCD_KEY=$(bin_key etcd "$ETCD_VERSION" "$(basename "$wrap")" "$ldflags" cgo0)
  ETCD_BIN=$CACHE/bin/$ETCD_KEY
  CGO_ENABLED=0 go_bin "$wrap" "$ETCD_KEY" etcd go.etcd.io/etcd/server/v3 -ldflags "$ldflags"
}

# envtest_assets: build what controller-runtime's envtest runs (kube-apiserver, etcd,
# kubectl) and set ENVTEST_DIR to a directory holding the three, as KUBEBUILDER_ASSETS wants.
envtest_assets() {
  build_k8s kube-apiserver kubectl
  build_etcd
  ENVTEST_DIR=$CACHE/envtest/$K8S_KEY+$ETCD_KEY
  if [[ ! -x $ENVTEST_DIR/etcd ]]; then
    mkdir -p "$ENVTEST_DIR"
    put "$K8S_BIN/kube-apiserver" "$ENVTEST_DIR/kube-apiserver"
    put "$K8S_BIN/kubectl" "$ENVTEST_DIR/kubectl"
    put "$ETCD_BIN/etcd" "$ENVTEST_DIR/etcd"
  fi
}

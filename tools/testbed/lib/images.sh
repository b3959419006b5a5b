# shellcheck shell=bash
# Base images and the product images built on them. Dockerfiles are written here, next to
# the binaries they copy, into build contexts under $CACHE/images/.

# Internal base images (not products: not listed in images.txt, never pushed).
STATIC_BASE=cluster-init-testbed/static-base:latest
NET_BASE=cluster-init-testbed/debian-iptables:$DEBIAN_SUITE
HAPROXY_BASE=cluster-init-testbed/debian-haproxy:$DEBIAN_SUITE
GIT_BASE=cluster-init-testbed/debian-git:$DEBIAN_SUITE
GIT_SERVER_IMAGE=cluster-init-testbed/git-server:latest
S3_IMAGE=cluster-init-testbed/s3:latest
# The application the placement end-to-end test places on clusters (tools/testbed/hello).
HELLO_IMAGE=cluster-init-testbed/hello:v1

# ---------------------------------------------------------------------------------------
# Bases.

# build_static_base: a distroless-like base for static Go binaries: passwd and group with
# root, nobody (65534) and nonroot (65532), nsswitch.conf, CA certificates, a sticky /tmp.
build_static_base() {
  local ctx r
  ctx=$(context_dir static-base)
  r=$ctx/rootfs
  mkdir -p "$r/etc/ssl/certs" "$r/tmp" "$r/home/nonroot" "$r/var/run"
  chmod 1777 "$r/tmp"
  cat >"$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$r/etc/group"
  echo 'hosts: files dns' >"$r/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/ca-certificates.crt"
  cat >"$ctx/Dockerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin
EOF
  build_image "$STATIC_BASE" "$ctx"
}

# Customizations of the Debian root filesystems (see debian_rootfs).
rootfs_net() { install_iptables_wrapper "$1"; }
rootfs_git() { ln -sf /usr/bin/tini "$1/sbin/tini"; }
rootfs_haproxy() { mkdir -p "$1/usr/local/etc/haproxy" "$1/var/lib/haproxy"; }

# rootfs_kind_base ROOT: what kind's images/base/Dockerfile does on top of its packages:
# kind's static files, systemd trimmed for a container, kubelet and containerd enabled.
rootfs_kind_base() {
  local root=$1 files=$KIND_BASE_FILES
  install -m 0755 "$files"/usr/local/bin/* "$root/usr/local/bin/"
  mkdir -p "$root/kind/bin" "$root/LICENSES" "$root/etc/containerd" "$root/etc/default" \
    "$root/etc/sysctl.d" "$root/etc/systemd/system/kubelet.service.d" "$root/etc/kubernetes/manifests"
  install -m 0644 "$files"/kind/README.txt "$root/kind/"
  install -m 0755 "$files"/kind/bin/* "$root/kind/bin/"
  chmod 0755 "$root/kind" "$root/kind/bin"
  install -m 0644 "$files"/LICENSES/* "$root/LICENSES/"
  install -m 0644 "$files"/etc/crictl.yaml "$root/etc/"
  install -m 0644 "$files"/etc/containerd/* "$root/etc/containerd/"
  install -m 0644 "$files"/etc/default/* "$root/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$root/etc/sysctl.d/"
  install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
  find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
    "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
    "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
  chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
}

# The Debian root filesystems; run in the background lane (network and disk, no docker).
KIND_BASE_PACKAGES=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,nfs-common,open-iscsi,e2fsprogs,bash,ca-certificates,curl,jq,procps
build_rootfs_all() {
  KIND_BASE_FILES=$(mod_dir sigs.k8s.io/kind "$KIND_VERSION")/images/base/files
  ROOTFS_NET=$(debian_rootfs debian-iptables iptables,nftables,conntrack,ipset,kmod,iproute2,ca-certificates rootfs_net)
  ROOTFS_HAPROXY=$(debian_rootfs debian-haproxy haproxy,procps rootfs_haproxy)
  ROOTFS_GIT=$(debian_rootfs debian-git ca-certificates,tini,git,openssh-client,gnupg rootfs_git)
  ROOTFS_KIND=$(debian_rootfs kind-base "$KIND_BASE_PACKAGES" rootfs_kind_base "$KIND_BASE_FILES")
  declare -p ROOTFS_NET ROOTFS_HAPROXY ROOTFS_GIT ROOTFS_KIND >"$CACHE/tmp/rootfs.env"
}

# import_debian_bases: docker import the root filesystems made by build_rootfs_all.
import_debian_bases() {
  # shellcheck disable=SC1091 # written by build_rootfs_all at run time (declare -p), not in the tree
  source "$CACHE/tmp/rootfs.env"
  import_rootfs "$NET_BASE" "$ROOTFS_NET"
  import_rootfs "$HAPROXY_BASE" "$ROOTFS_HAPROXY"
  import_rootfs "$GIT_BASE" "$ROOTFS_GIT"
  import_rootfs "cluster-init-testbed/kind-base-rootfs:$KIND_VERSION" "$ROOTFS_KIND"
}

# ---------------------------------------------------------------------------------------
# Product images.

# binary_image REF BASE USER ENTRYPOINT SRC:DEST... : an image of BASE with binaries
# copied in, run as USER ("" keeps the base's user) with the exec-form ENTRYPOINT
# (a JSON array).
binary_image() {
  local ref=$1 base=$2 user=$3 entrypoint=$4
  shift 4
  local name ctx pair i=0
  name=$(tr '/:' '__' <<<"$ref")
  ctx=$(context_dir "$name")
  {
    echo "FROM $base"
    for pair in "$@"; do
      put "${pair%%:*}" "$ctx/f$i"
      echo "COPY f$i ${pair#*:}"
      i=$((i + 1))
    done
    if [[ -n $user ]]; then echo "USER $user"; fi
    echo "ENTRYPOINT $entrypoint"
  } >"$ctx/Dockerfile.tmp"
  mv "$ctx/Dockerfile.tmp" "$ctx/Dockerfile"
  build_image "$ref" "$ctx"
  product "$ref"
}

# Kubernetes control plane and kube-proxy, as the release images lay them out.
images_kubernetes() {
  local v=$KUBERNETES_VERSION c
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    binary_image "registry.k8s.io/$c:$v" "$STATIC_BASE" "" "[\"/usr/local/bin/$c\"]" "$K8S_BIN/$c:/usr/local/bin/$c"
  done
  # kube-proxy programs iptables/nftables: Debian base with the iptables wrapper.
  binary_image "registry.k8s.io/kube-proxy:$v" "$NET_BASE" "" '["/usr/local/bin/kube-proxy"]' "$K8S_BIN/kube-proxy:/usr/local/bin/kube-proxy"
}

# etcd, CoreDNS and pause with the tags kubeadm asks for ($1 etcd tag, $2 CoreDNS tag,
# $3 pause tag, $4 extra pause tag: kind's containerd sandbox image).
images_kubeadm_addons() {
  binary_image "registry.k8s.io/etcd:$1" "$STATIC_BASE" "" '["/usr/local/bin/etcd"]' "$ETCD_BIN/etcd:/usr/local/bin/etcd"
  # Upstream runs CoreDNS as 65532 with a file capability (setcap) to bind port 53; file
  # capabilities do not survive this build reliably, so it runs as root, which kubeadm's
  # manifest (capabilities: drop ALL, add NET_BIND_SERVICE) allows.
  binary_image "registry.k8s.io/coredns/coredns:$2" "$STATIC_BASE" "" '["/coredns"]' "$COREDNS_BIN/coredns:/coredns"
  binary_image "registry.k8s.io/pause:$3" scratch 65535:65535 '["/pause"]' "$PAUSE_BIN/pause:/pause"
  if [[ $4 != "$3" ]]; then
    docker tag "registry.k8s.io/pause:$3" "registry.k8s.io/pause:$4"
    product "registry.k8s.io/pause:$4"
  fi
}

# kind's storage images ($1 provisioner ref, $2 helper ref): the provisioner binary, and a
# helper with the sh, rm and mkdir its helper pods run (busybox from Debian's busybox-static).
images_kind_storage() {
  binary_image "$1" "$STATIC_BASE" "" '["/usr/local/bin/local-path-provisioner"]' "$LPP_BIN/local-path-provisioner:/usr/local/bin/local-path-provisioner"
  local ctx a
  ctx=$(context_dir local-path-helper)
  mkdir -p "$ctx/rootfs/bin"
  put /bin/busybox "$ctx/rootfs/bin/busybox"
  for a in sh rm mkdir; do ln -s busybox "$ctx/rootfs/bin/$a"; done
  printf 'FROM %s\nCOPY rootfs/ /\n' "$STATIC_BASE" >"$ctx/Dockerfile"
  build_image "$2" "$ctx"
  product "$2"
}

# Flux controllers, laid out as their upstream Dockerfiles (binary in /usr/local/bin, user
# 65534, CA certificates). kustomize-controller runs under tini with git, ssh and gnupg.
images_flux() {
  binary_image "ghcr.io/fluxcd/source-controller:$FLUX_SOURCE_CONTROLLER_VERSION" "$STATIC_BASE" 65534:65534 \
    '["source-controller"]' "$FLUX_SOURCE_BIN/source-controller:/usr/local/bin/source-controller"
  binary_image "ghcr.io/fluxcd/helm-controller:$FLUX_HELM_CONTROLLER_VERSION" "$STATIC_BASE" 65534:65534 \
    '["helm-controller"]' "$FLUX_HELM_BIN/helm-controller:/usr/local/bin/helm-controller"
  binary_image "ghcr.io/fluxcd/notification-controller:$FLUX_NOTIFICATION_CONTROLLER_VERSION" "$STATIC_BASE" 65534:65534 \
    '["notification-controller"]' "$FLUX_NOTIFICATION_BIN/notification-controller:/usr/local/bin/notification-controller"
  local ref=ghcr.io/fluxcd/kustomize-controller:$FLUX_KUSTOMIZE_CONTROLLER_VERSION ctx
  ctx=$(context_dir kustomize-controller)
  put "$FLUX_KUSTOMIZE_BIN/kustomize-controller" "$ctx/kustomize-controller"
  cat >"$ctx/Dockerfile" <<EOF
FROM $GIT_BASE
COPY kustomize-controller /usr/local/bin/
USER 65534:65534
ENV GNUPGHOME=/tmp
ENTRYPOINT ["/sbin/tini", "--", "kustomize-controller"]
EOF
  build_image "$ref" "$ctx"
  product "$ref"
}

# cert-manager: the chart passes args only, so each ENTRYPOINT is the binary, at the path
# of the upstream images (/app/cmd/<name>/<name>, user 1000).
images_cert_manager() {
  local c
  for c in "${CERT_MANAGER_COMMANDS[@]}"; do
    binary_image "quay.io/jetstack/cert-manager-$c:$CERT_MANAGER_VERSION" "$STATIC_BASE" 1000 \
      "[\"/app/cmd/$c/$c\"]" "$CERT_MANAGER_BIN/$c:/app/cmd/$c/$c"
  done
}

# Cluster API managers: /manager, user 65532 (distroless nonroot); CAPD runs as root
# because it talks to the Docker socket.
images_capi() {
  local r=registry.k8s.io/cluster-api v=$CLUSTER_API_VERSION
  binary_image "$r/cluster-api-controller:$v" "$STATIC_BASE" 65532 '["/manager"]' "$CAPI_BIN/core:/manager"
  binary_image "$r/kubeadm-bootstrap-controller:$v" "$STATIC_BASE" 65532 '["/manager"]' "$CAPI_BIN/kubeadm-bootstrap:/manager"
  binary_image "$r/kubeadm-control-plane-controller:$v" "$STATIC_BASE" 65532 '["/manager"]' "$CAPI_BIN/kubeadm-control-plane:/manager"
  binary_image "$r/capd-manager:$CAPD_VERSION" "$STATIC_BASE" "" '["/manager"]' "$CAPI_BIN/capd:/manager"
}

# vendored_image FILE NAME: the image reference the vendored manifest FILE (under
# kustomize-components/) gives the container image named NAME (the last path element, before
# the tag): the manifests say which images the clusters pull.
vendored_image() {
  local ref
  ref=$(awk -v n="$2" '$1 == "image:" { r = $2; sub(/:[^:\/]*$/, "", r); sub(/.*\//, "", r); if (r == n) { print $2; exit } }' \
    "$REPO_ROOT/kustomize-components/$1")
  [[ -n $ref ]] || die "no image $2 in kustomize-components/$1"
  printf '%s\n' "$ref"
}

# The OpenStack and RKE2 providers, with the references of their vendored manifests: /manager,
# user 65532, as their Dockerfiles build them. The manifests' tags must be the versions built.
images_providers() {
  local ref bin pair file name version
  for pair in "capo/upstream/infrastructure-openstack.yaml capi-openstack-controller $CAPO_VERSION $CAPO_BIN/manager" \
    "orc/upstream/install.yaml openstack-resource-controller $ORC_VERSION $ORC_BIN/manager" \
    "cabpr/upstream/bootstrap-rke2.yaml cluster-api-provider-rke2-bootstrap $CAPRKE2_VERSION $CAPRKE2_BIN/rke2-bootstrap" \
    "cabpr/upstream/control-plane-rke2.yaml cluster-api-provider-rke2-controlplane $CAPRKE2_VERSION $CAPRKE2_BIN/rke2-control-plane"; do
    read -r file name version bin <<<"$pair"
    ref=$(vendored_image "$file" "$name")
    [[ ${ref##*:} == "$version" ]] || die "kustomize-components/$file runs $ref, not version $version (tools/versions.env)"
    binary_image "$ref" "$STATIC_BASE" 65532 '["/manager"]' "$bin:/manager"
  done
}

# CAPD's load balancer ($1: image reference from CAPD's constants): Debian's haproxy with
# the entry point of kind's haproxy image. CAPD writes the config and sends SIGHUP.
# Where the hard open-files limit is too low for CAPD's "maxconn 100000", the image
# gets a wrapper that lowers maxconn before haproxy (re)starts.
image_haproxy() {
  local ref=$1 ctx
  ctx=$(context_dir haproxy)
  cp "$TESTBED_DIR/images/haproxy/haproxy.cfg" "$ctx/haproxy.cfg"
  {
    echo "FROM $HAPROXY_BASE"
    echo "COPY haproxy.cfg /usr/local/etc/haproxy/haproxy.cfg"
    if [[ $SANDBOX_HAPROXY_CLAMP == true ]]; then
      cp "$TESTBED_DIR/images/haproxy/haproxy-maxconn-clamp" "$ctx/haproxy"
      echo "COPY haproxy /usr/local/bin/haproxy"
    fi
    echo "STOPSIGNAL SIGUSR1"
    echo 'ENTRYPOINT ["haproxy", "-sf", "7", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
  } >"$ctx/Dockerfile"
  build_image "$ref" "$ctx"
  product "$ref"
}

# Flannel ($1: CNI plugin image reference from the flannel manifest). flanneld runs
# iptables/nftables and ip, and its init container runs cp: Debian base with those. The CNI
# plugin image holds /flannel and a cp (busybox) for its init container.
images_flannel() {
  local ref=ghcr.io/flannel-io/flannel:$FLANNEL_VERSION ctx
  binary_image "$ref" "$NET_BASE" "" '["/opt/bin/flanneld"]' "$FLANNEL_BIN/flanneld:/opt/bin/flanneld"
  ctx=$(context_dir flannel-cni-plugin)
  mkdir -p "$ctx/rootfs/bin"
  put "$FLANNEL_CNI_BIN/flannel" "$ctx/rootfs/flannel"
  put /bin/busybox "$ctx/rootfs/bin/busybox"
  ln -s busybox "$ctx/rootfs/bin/cp"
  printf 'FROM %s\nCOPY rootfs/ /\n' "$STATIC_BASE" >"$ctx/Dockerfile"
  build_image "$1" "$ctx"
  product "$1"
}

# metrics-server: /metrics-server, user 65534, as its upstream Dockerfile.
image_metrics_server() {
  binary_image "registry.k8s.io/metrics-server/metrics-server:$METRICS_SERVER_VERSION" "$STATIC_BASE" 65534 \
    '["/metrics-server"]' "$METRICS_SERVER_BIN/metrics-server:/metrics-server"
}

# The placement test's application: static, user 65532. Pushed like the products, so that every
# cluster pulls it through the registry.
image_hello() {
  binary_image "$HELLO_IMAGE" "$STATIC_BASE" 65532 '["/hello"]' "$HELLO_BIN/hello:/hello"
}

# The git server: the gitserver program on Debian with git (git-http-backend). Not a product
# image: it runs next to the registry, never in a cluster.
image_git_server() {
  local ctx
  ctx=$(context_dir git-server)
  put "$GIT_SERVER_BIN/gitserver" "$ctx/gitserver"
  cat >"$ctx/Dockerfile" <<EOF
FROM $GIT_BASE
COPY gitserver /usr/local/bin/gitserver
VOLUME ["/srv/git"]
EXPOSE 3000
ENTRYPOINT ["/sbin/tini", "--", "gitserver"]
EOF
  build_image "$GIT_SERVER_IMAGE" "$ctx"
}

# The object store: SeaweedFS's weed on the static base, its data in a volume. Not a product
# image either: it runs next to the registry, as a cloud's object store is outside its clusters.
image_s3() {
  local ctx
  ctx=$(context_dir s3)
  put "$SEAWEEDFS_BIN/weed" "$ctx/weed"
  cat >"$ctx/Dockerfile" <<EOF
FROM $STATIC_BASE
COPY weed /usr/bin/weed
VOLUME ["/data"]
EXPOSE 8333
ENTRYPOINT ["/usr/bin/weed"]
EOF
  build_image "$S3_IMAGE" "$ctx"
}

# The registry: filesystem storage on a volume, HTTP on :5000, deletion enabled.
image_registry() {
  local ref=cluster-init/registry:$REGISTRY_VERSION ctx
  ctx=$(context_dir registry)
  put "$REGISTRY_BIN/registry" "$ctx/registry"
  cp "$TESTBED_DIR/images/registry/config.yml" "$ctx/config.yml"
  cat >"$ctx/Dockerfile" <<EOF
FROM $STATIC_BASE
COPY registry /bin/registry
COPY config.yml /etc/distribution/config.yml
VOLUME ["/var/lib/registry"]
EXPOSE 5000
ENV OTEL_TRACES_EXPORTER=none
ENTRYPOINT ["registry"]
CMD ["serve", "/etc/distribution/config.yml"]
EOF
  build_image "$ref" "$ctx"
  product "$ref"
}

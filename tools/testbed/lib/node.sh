# shellcheck shell=bash
# The kind node image: kind's base image (Debian root filesystem + kind's files + the
# container runtime), then what `kind build node-image` adds (Kubernetes binaries, version
# file, storage manifest, images preloaded into containerd), without any registry pull.

# build_kind_base: the base image, with the sandbox's containerd fix when needed.
build_kind_base() {
  KIND_BASE=cluster-init-testbed/kind-base:$KIND_VERSION
  local ctx files
  ctx=$(context_dir kind-base)
  files=$(mod_dir sigs.k8s.io/kind "$KIND_VERSION")/images/base/files
  mkdir -p "$ctx/bin" "$ctx/cni"
  local b
  for b in containerd ctr containerd-shim-runc-v2; do put "$CONTAINERD_BIN/$b" "$ctx/bin/$b"; done
  put "$CRICTL_BIN/crictl" "$ctx/bin/crictl"
  put "$RUNC_BIN/runc" "$ctx/runc"
  for b in "$CNI_BIN"/*; do put "$b" "$ctx/cni/$(basename "$b")"; done
  # The runtime spec template, as kind's base image makes it with `ctr oci spec` (which
  # only prints containerd's defaults): a hook that mounts the product files, no rlimits.
  "$CONTAINERD_BIN/ctr" oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$ctx/cri-base.json"
  cp "$files/etc/containerd/config.toml" "$ctx/config.toml"
  if [[ $SANDBOX_OOM_RESTRICT == true ]]; then
    # Without CAP_SYS_RESOURCE the node cannot give the pause container its negative
    # oom_score_adj; containerd clamps it instead, as in rootless mode.
    sed -i 's/^\([[:space:]]*\)restrict_oom_score_adj = false/\1restrict_oom_score_adj = true/' "$ctx/config.toml"
    grep -q 'restrict_oom_score_adj = true' "$ctx/config.toml" || die "could not set restrict_oom_score_adj in kind's containerd config"
  fi
  cat >"$ctx/Dockerfile" <<EOF
FROM cluster-init-testbed/kind-base-rootfs:$KIND_VERSION
COPY bin/ /usr/local/bin/
COPY runc /usr/local/sbin/runc
COPY cni/ /opt/cni/bin/
COPY cri-base.json config.toml /etc/containerd/
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
EOF
  build_image "$KIND_BASE" "$ctx"
}

# build_node_image REF STORAGE_MANIFEST IMAGE...: the node image REF from the kind base,
# with IMAGE... (local docker images) preloaded into the node's containerd.
build_node_image() {
  local ref=$1 manifest=$2
  shift 2
  local images=("$@") ids=() i
  for i in "${images[@]}"; do ids+=("$(image_id "$i")"); done
  local h
  h=$(hash_strings "$(image_id "$KIND_BASE")" "$(sha256sum "$K8S_BIN/kubeadm" "$K8S_BIN/kubelet" "$K8S_BIN/kubectl")" \
    "$(sha256sum <"$manifest")" "${images[@]}" "${ids[@]}" "$SANDBOX_CGROUP_V1" "$(hash_functions build_node_image node_assemble)")
  if [[ $(image_hash "$ref") == "$h" ]]; then
    log "    $ref: up to date"
    product "$ref"
    return 0
  fi
  log "    $ref: assembling"
  local c=cluster-init-testbed-nodebuild-$$
  docker rm -f -v "$c" >/dev/null 2>&1 || true
  TEMP_CONTAINERS+=("$c")
  docker run -d --name "$c" --entrypoint=sleep --security-opt seccomp=unconfined "$KIND_BASE" infinity >/dev/null
  node_assemble "$c" "$manifest" "${images[@]}"
  # Same commit as kind's node image build, plus the input hash label.
  docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' \
    --change "LABEL $INPUT_HASH_LABEL=$h" \
    "$c" "$ref" >/dev/null
  docker rm -f -v "$c" >/dev/null
  product "$ref"
}

# node_assemble CONTAINER MANIFEST IMAGE...: the steps of kind's node image build.
node_assemble() {
  local c=$1 manifest=$2
  shift 2
  local b
  for b in kubeadm kubelet kubectl; do
    docker cp "$K8S_BIN/$b" "$c:/usr/bin/$b"
    docker exec "$c" chown root:root "/usr/bin/$b"
    docker exec "$c" chmod 0755 "/usr/bin/$b"
  done
  printf '%s' "$KUBERNETES_VERSION" | docker exec -i "$c" cp /dev/stdin /kind/version
  docker exec "$c" mkdir -p /kind/manifests
  docker exec -i "$c" cp /dev/stdin /kind/manifests/default-storage.yaml <"$manifest"
  if [[ $SANDBOX_CGROUP_V1 == true ]]; then
    # kubelet >= 1.35 refuses to start on cgroup v1 unless told otherwise. /etc/default/kubelet
    # is read by the kubelet unit, so CAPD machines made from this image inherit it.
    docker exec "$c" sed -i 's|^KUBELET_EXTRA_ARGS=.*|& --fail-cgroupv1=false|' /etc/default/kubelet
  fi
  # Preload the images: containerd in the build container, images streamed from docker,
  # pinned so that the kubelet's image GC keeps them (as kind does).
  docker exec "$c" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
  docker exec "$c" bash -c 'for i in $(seq 30); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; cat /tmp/containerd.log; exit 1' ||
    die "containerd did not start in the node build container"
  # (ctr's stderr only warns that cgroup v1 is deprecated on such hosts.)
  docker save "$@" | docker exec -i "$c" ctr --namespace=k8s.io images import \
    --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null 2>"$CACHE/logs/node-import.log" ||
    die "image import into the node failed: $(cat "$CACHE/logs/node-import.log")"
  log "    preloaded: $(docker exec "$c" ctr --namespace=k8s.io images list -q 2>/dev/null | grep -vc '^sha256:') image references"
  docker exec "$c" pkill containerd || true
  docker exec "$c" bash -c 'for i in $(seq 20); do pgrep -x containerd >/dev/null || exit 0; sleep 0.5; done; exit 1' || true
  docker exec "$c" rm -f /tmp/containerd.log
}

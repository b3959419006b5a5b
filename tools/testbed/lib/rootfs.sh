# shellcheck shell=bash
# Debian root filesystems made with debootstrap (minbase variant), cached as tarballs.
# Images whose upstream base is a distribution (kind's node base, kube-proxy's and
# flannel's iptables images, haproxy, Flux's git-enabled controller) start from these;
# nothing is pulled from a registry.

DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# debian_rootfs NAME PACKAGES CUSTOMIZE [INPUT DIR...]: print the path of the tarball of a
# minbase root filesystem with PACKAGES (comma separated), made by debootstrap and then
# changed by the shell function CUSTOMIZE ROOTDIR. The tarball name is keyed by the suite,
# the mirror, the packages, the source of CUSTOMIZE and the contents of the INPUT DIRs.
# Downloaded packages are kept in $CACHE/debootstrap for the next rootfs.
debian_rootfs() {
  local name=$1 pkgs=$2 customize=$3
  shift 3
  local inputs=() d
  for d in "$@"; do inputs+=("$(hash_tree "$d")"); done
  local key
  key=$(hash_strings "$DEBIAN_SUITE" "$DEBIAN_MIRROR" "$pkgs" "$(hash_functions "$customize")" "${inputs[@]}")
  local tarball=$CACHE/rootfs/$name-$key.tar
  if [[ -f $tarball ]]; then
    log "    rootfs $name: cached"
    printf '%s\n' "$tarball"
    return 0
  fi
  local root=$CACHE/tmp/rootfs-$name logf=$CACHE/logs/debootstrap-$name.log start=$SECONDS
  rm -rf "$root"
  mkdir -p "$root" "$CACHE/debootstrap"
  log "    rootfs $name: debootstrap $DEBIAN_SUITE +${pkgs}"
  if ! debootstrap --variant=minbase --include="$pkgs" --cache-dir="$CACHE/debootstrap" \
    "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" >"$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    die "debootstrap of $name failed (log: $logf)"
  fi
  "$customize" "$root"
  rootfs_trim "$root"
  tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
  local old
  for old in "$CACHE/rootfs/$name"-*.tar; do
    [[ $old == "$tarball" ]] || rm -f "$old"
  done
  log "    rootfs $name: $(du -h "$tarball" | cut -f1) in $(fmt_duration $((SECONDS - start)))"
  printf '%s\n' "$tarball"
}

# rootfs_trim ROOT: drop what an image does not need (apt lists and caches, docs, manuals,
# locales), as the slim Debian images do.
rootfs_trim() {
  local root=$1
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  : >"$root/etc/machine-id"
  rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
}

# install_iptables_wrapper ROOT: make iptables/ip6tables choose the legacy or nf_tables
# backend at first use, matching what the host (a kind node) already uses, like the
# iptables-wrapper of the upstream kube-proxy and flannel images: rules written with the
# other backend would be invisible to the node.
install_iptables_wrapper() {
  local root=$1 cmd
  cat >"$root/usr/sbin/iptables-wrapper" <<'EOF'
#!/bin/sh
# Chooses iptables-legacy or iptables-nft by counting the rules each backend sees, points
# the iptables* links at that backend, then runs the command it was called as.
set -e
legacy=$( (iptables-legacy-save || true; ip6tables-legacy-save || true) 2>/dev/null | grep -c '^-' || true)
nft=$( (iptables-nft-save || true; ip6tables-nft-save || true) 2>/dev/null | grep -c '^-' || true)
if [ "${legacy:-0}" -gt "${nft:-0}" ]; then mode=legacy; else mode=nft; fi
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "xtables-$mode-multi" "/usr/sbin/$cmd"
done
exec "$0" "$@"
EOF
  chmod 0755 "$root/usr/sbin/iptables-wrapper"
  for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf iptables-wrapper "$root/usr/sbin/$cmd"
  done
}

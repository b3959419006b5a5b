# shellcheck shell=bash
# Docker engine, sandbox detection and fixes, cached image builds.

# shellcheck source=prereqs.sh
source "$TESTBED_DIR/lib/prereqs.sh"

# ---------------------------------------------------------------------------------------
# Engine.

# docker_start: start dockerd in the background unless an engine answers already.
docker_start() {
  if docker info >/dev/null 2>&1; then return 0; fi
  [[ -x /usr/sbin/dockerd ]] || prereqs_install
  mkdir -p "$CACHE/logs"
  log "starting dockerd (log: $CACHE/logs/dockerd.log)"
  # In a session of its own and at normal priority: a signal to the script's process group (a
  # Ctrl-C, a SIGSTOP to pause a build) and the script's nice value must not reach the engine and
  # every container it runs.
  setsid nice -n "$((-$(nice)))" /usr/sbin/dockerd >>"$CACHE/logs/dockerd.log" 2>&1 </dev/null &
  local i
  for ((i = 0; i < 60; i++)); do
    if docker info >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  tail -n 20 "$CACHE/logs/dockerd.log" >&2
  die "dockerd did not come up within 60s"
}

# docker_ready: the host packages (lib/prereqs.sh), a running engine with the sandbox fixes this host needs (the runtime
# wrapper lives in the cache: a deleted cache is repaired here).
docker_ready() {
  prereqs_install
  docker_start
  sandbox_detect
  docker_capfix
  inotify_limits
}

# inotify_limits: every kind or CAPD node runs systemd, containerd and a kubelet, each holding
# inotify instances; with four clusters the kernel's default of 128 instances per user is spent,
# and a new node's containerd starts without its CRI plugin ("failed to create fsnotify watcher:
# too many open files"): the machine waits for ever. kind's known issues give these values.
inotify_limits() {
  local key want have
  for key in max_user_instances:512 max_user_watches:524288; do
    want=${key#*:} key=${key%%:*}
    have=$(cat "/proc/sys/fs/inotify/$key")
    if ((have < want)); then
      if echo "$want" >"/proc/sys/fs/inotify/$key" 2>/dev/null; then
        log "    fs.inotify.$key: $have -> $want"
      else
        warn "fs.inotify.$key is $have and cannot be raised here: more than three clusters at once may leave machines without a container runtime"
      fi
    fi
  done
}

# ---------------------------------------------------------------------------------------
# Sandbox detection. Each fix is applied only when the host needs it, and the detected
# state is part of the cache key of what it changes (SANDBOX_FINGERPRINT).

# sandbox_detect: set
#   SANDBOX_MISSING_CAPS   capabilities absent from our bounding set (space separated)
#   SANDBOX_OOM_RESTRICT   true when CAP_SYS_RESOURCE is missing: containerd in the node must
#                          not set negative oom_score_adj (restrict_oom_score_adj = true)
#   SANDBOX_CGROUP_V1      true on cgroup v1 hosts: kubelet >= 1.35 refuses cgroup v1 unless
#                          started with --fail-cgroupv1=false
#   SANDBOX_NOFILE_HARD    hard open-files limit
#   SANDBOX_HAPROXY_CLAMP  true when that limit is too low for the "maxconn 100000" that
#                          CAPD writes into its load balancer config (haproxy needs about two
#                          descriptors per connection and may not raise the hard limit)
#   SANDBOX_FINGERPRINT    all of the above as one string
sandbox_detect() {
  local names=(CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL
    CAP_SETGID CAP_SETUID CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST
    CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER CAP_SYS_MODULE CAP_SYS_RAWIO
    CAP_SYS_CHROOT CAP_SYS_PTRACE CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT CAP_SYS_NICE
    CAP_SYS_RESOURCE CAP_SYS_TIME CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE
    CAP_AUDIT_CONTROL CAP_SETFCAP CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM
    CAP_BLOCK_SUSPEND CAP_AUDIT_READ CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE)
  local last bnd i missing=()
  last=$(cat /proc/sys/kernel/cap_last_cap)
  bnd=$((16#$(awk '/^CapBnd/ { print $2 }' /proc/self/status)))
  for ((i = 0; i <= last && i < ${#names[@]}; i++)); do
    (((bnd >> i) & 1)) || missing+=("${names[$i]}")
  done
  SANDBOX_MISSING_CAPS=${missing[*]:-}
  SANDBOX_OOM_RESTRICT=false
  [[ " $SANDBOX_MISSING_CAPS " != *" CAP_SYS_RESOURCE "* ]] || SANDBOX_OOM_RESTRICT=true
  SANDBOX_CGROUP_V1=false
  [[ -f /sys/fs/cgroup/cgroup.controllers ]] || SANDBOX_CGROUP_V1=true
  SANDBOX_NOFILE_HARD=$(ulimit -Hn)
  SANDBOX_HAPROXY_CLAMP=false
  if [[ $SANDBOX_NOFILE_HARD != unlimited ]] && ((SANDBOX_NOFILE_HARD < 2 * 100000 + 1000)); then
    SANDBOX_HAPROXY_CLAMP=true
  fi
  SANDBOX_FINGERPRINT="missing-caps=${SANDBOX_MISSING_CAPS// /,} oom-restrict=$SANDBOX_OOM_RESTRICT cgroup-v1=$SANDBOX_CGROUP_V1 haproxy-clamp=$SANDBOX_HAPROXY_CLAMP"
  log "sandbox: $SANDBOX_FINGERPRINT (hard nofile $SANDBOX_NOFILE_HARD)"
}

# docker_capfix: on hosts with missing capabilities, make runc-capfix Docker's default
# runtime (see lib/runc-capfix). The wrapper lives in the cache; only daemon.json is
# touched in /etc, merged with what is there, and dockerd reloads it on SIGHUP.
docker_capfix() {
  [[ -n $SANDBOX_MISSING_CAPS ]] || return 0
  local wrapper=$CACHE/libexec/runc-capfix conf=/etc/docker/daemon.json
  mkdir -p "$CACHE/libexec"
  if ! cmp -s "$TESTBED_DIR/lib/runc-capfix" "$wrapper"; then
    install -m 0755 "$TESTBED_DIR/lib/runc-capfix" "$wrapper"
  fi
  local current='{}' wanted
  [[ -s $conf ]] && current=$(cat "$conf")
  wanted=$(jq --arg p "$wrapper" '.runtimes["runc-capfix"] = {path: $p} | .["default-runtime"] = "runc-capfix"' <<<"$current")
  if [[ $(jq -S . <<<"$current") != $(jq -S . <<<"$wanted") ]]; then
    log "installing runc-capfix as Docker's default runtime (missing: $SANDBOX_MISSING_CAPS)"
    mkdir -p /etc/docker
    printf '%s\n' "$wanted" >"$conf"
    local pid
    pid=$(pidof dockerd) || die "dockerd is not running locally: cannot reload $conf"
    kill -HUP "$pid"
  fi
  local i
  for ((i = 0; i < 20; i++)); do
    [[ $(docker info --format '{{.DefaultRuntime}}' 2>/dev/null) != runc-capfix ]] || return 0
    sleep 0.5
  done
  die "dockerd did not take runc-capfix as default runtime (see $conf)"
}

# TEMP_CONTAINERS: containers a script made for its own work; remove_temp_containers (an
# EXIT trap of the scripts) removes them whatever happens.
TEMP_CONTAINERS=()
remove_temp_containers() {
  local c
  for c in "${TEMP_CONTAINERS[@]}"; do docker rm -f -v "$c" >/dev/null 2>&1 || true; done
}

# ---------------------------------------------------------------------------------------
# Images. Every image carries $INPUT_HASH_LABEL; BUILT_IMAGES collects the product images
# of a run (written to $CACHE/images.txt).

BUILT_IMAGES=()

# image_hash REF: the input hash label of a local image, or "".
image_hash() {
  docker image inspect --format "{{ index .Config.Labels \"$INPUT_HASH_LABEL\" }}" "$1" 2>/dev/null || true
}

# image_id REF: local image ID (fails if absent).
image_id() { docker image inspect --format '{{.Id}}' "$1"; }

# dockerfile_bases DIR: the image IDs of the FROM lines of DIR/Dockerfile (scratch skipped),
# so that a rebuilt base rebuilds what is on top of it.
dockerfile_bases() {
  local ref
  awk 'toupper($1) == "FROM" { print $2 }' "$1/Dockerfile" | while read -r ref; do
    [[ $ref == scratch ]] || image_id "$ref" || die "base image $ref missing"
  done
}

# build_image REF CONTEXT [EXTRA TAG...]: docker build CONTEXT as REF unless REF exists
# with the same input hash. The legacy builder is used: it needs nothing from a registry.
build_image() {
  local ref=$1 ctx=$2
  shift 2
  local h bases
  bases=$(dockerfile_bases "$ctx")
  h=$(hash_strings "$(hash_tree "$ctx")" "$bases")
  if [[ $(image_hash "$ref") == "$h" ]]; then
    log "    $ref: up to date"
  else
    log "    $ref: building"
    local logf
    logf=$CACHE/logs/docker-build-$(basename "$ctx").log
    if ! DOCKER_BUILDKIT=0 docker build --label "$INPUT_HASH_LABEL=$h" -t "$ref" "$ctx" >"$logf" 2>&1; then
      tail -n 20 "$logf" >&2
      die "docker build of $ref failed (context: $ctx, log: $logf)"
    fi
  fi
  local t
  for t in "$@"; do docker tag "$ref" "$t"; done
}

# import_rootfs REF TARBALL: docker import a root filesystem tarball as REF (once per
# tarball: its name carries the hash of its inputs).
import_rootfs() {
  local ref=$1 tarball=$2
  local h
  h=$(basename "$tarball" .tar)
  if [[ $(image_hash "$ref") == "$h" ]]; then
    log "    $ref: up to date"
    return 0
  fi
  log "    $ref: importing $(du -h "$tarball" | cut -f1) root filesystem"
  docker import --change "LABEL $INPUT_HASH_LABEL=$h" "$tarball" "$ref" >/dev/null
}

# product REF...: record images to be listed in $CACHE/images.txt.
product() { BUILT_IMAGES+=("$@"); }

# context_dir NAME: a fresh build context directory in the cache.
context_dir() {
  local d=$CACHE/images/$1
  rm -rf "$d"
  mkdir -p "$d"
  printf '%s\n' "$d"
}

# put FILE DIR/NAME [MODE]: place a file in a build context (hard link when possible: the
# cache and the context share a file system, and binaries are large).
put() {
  local src=$1 dst=$2 mode=${3:-}
  mkdir -p "$(dirname "$dst")"
  ln -f "$src" "$dst" 2>/dev/null || cp "$src" "$dst"
  if [[ -n $mode ]]; then chmod "$mode" "$dst"; fi
}

# ---------------------------------------------------------------------------------------
# Network.

# ensure_kind_network PROBE_IMAGE: the docker network kind uses, created with kind's own settings
# (pkg/cluster/internal/providers/docker/network.go) when it does not exist yet, so that a
# later `kind create cluster` finds it as if it had made it: bridge with IP masquerade, the
# MTU of the default bridge, and an IPv6 ULA subnet derived from the name (IPv4 only when
# the engine has no IPv6). Unlike kind, the IPv4 subnet is given too: Docker 20.10 (Debian's)
# refuses `docker run --ip` on a subnet it picked itself ("user specified IP address is
# supported only when connecting to networks with user configured subnets"), and the
# simulated cloud starts its servers at fixed addresses. An existing network is probed with a
# container of PROBE_IMAGE at a fixed address; one that cannot serve is made again when only
# the test bed's own services use it, and refused with the reason otherwise.
ensure_kind_network() {
  local probe_image=$1 net=${NETWORK:-kind} out users
  if [[ -z $(docker network ls --filter "name=^${net}\$" --format '{{.ID}}') ]]; then
    create_kind_network "$net"
    return 0
  fi
  if out=$(network_takes_fixed_addresses "$net" "$probe_image"); then return 0; fi
  # Stopped containers count too: they would not start again without their network.
  users=$(docker ps -a --filter "network=$net" --format '{{.Names}}')
  local c own=() others=()
  for c in $users; do
    case $c in
      cluster-init-registry | cluster-init-git) own+=("$c") ;;
      *) others+=("$c") ;;
    esac
  done
  if ((${#others[@]} > 0)); then
    die "docker network $net cannot start containers at fixed addresses, which the simulated cloud needs ($out), and it is in use by ${others[*]}: run tools/testbed/down, then tools/testbed/up makes it again"
  fi
  log "docker network $net cannot start containers at fixed addresses ($out): making it again"
  for c in "${own[@]}"; do docker network disconnect --force "$net" "$c" >/dev/null; done
  docker network rm "$net" >/dev/null
  create_kind_network "$net"
  for c in "${own[@]}"; do docker network connect "$net" "$c" >/dev/null; done
  out=$(network_takes_fixed_addresses "$net" "$probe_image") ||
    die "docker network $net, made again, still cannot start containers at fixed addresses: $out"
}

# network_takes_fixed_addresses NET IMAGE: whether a container can start on NET at a fixed IPv4
# address (the last of the subnet's, which nothing else takes), as the simulated cloud's
# servers do; on failure, prints the engine's reason.
network_takes_fixed_addresses() {
  local net=$1 image=$2 subnet ip name=cluster-init-network-probe out rc=0
  subnet=$(docker network inspect "$net" -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' | tr ' ' '\n' | grep -m1 -F . || true)
  [[ -n $subnet ]] || {
    printf 'it has no IPv4 subnet'
    return 1
  }
  ip=$(last_host_address "$subnet")
  docker rm -f "$name" >/dev/null 2>&1 || true
  out=$(docker run -d --name "$name" --network "$net" --ip "$ip" "$image" 2>&1) || rc=$?
  docker rm -f "$name" >/dev/null 2>&1 || true
  if ((rc != 0)); then
    printf '%s' "$(printf '%s' "$out" | grep -m1 'Error response from daemon' || printf '%s' "$out" | tail -n1)"
    return 1
  fi
}

# create_kind_network NET: see ensure_kind_network. The IPv4 subnet is the first of Docker's
# default local pools (172.18-31.0.0/16, then 192.168.N.0/24) that no other network holds.
create_kind_network() {
  local net=$1 args=(-d=bridge -o com.docker.network.bridge.enable_ip_masquerade=true) mtu out v4 gw v6 attempt=0 ipv6=true
  mtu=$(docker network inspect bridge -f '{{ index .Options "com.docker.network.driver.mtu" }}' 2>/dev/null || true)
  if [[ $mtu =~ ^[0-9]+$ ]] && ((mtu > 0)); then args+=(-o "com.docker.network.driver.mtu=$mtu"); fi
  for v4 in $(ipv4_candidates); do
    # Named, as Docker would pick it (the subnet's first address): an engine lists the gateway
    # of a subnet given by hand only when it was given too, and the simulated cloud reads it.
    gw=$(first_host_address "$v4")
    while :; do
      if $ipv6; then
        v6=$(ula_subnet "$net" "$attempt")
        out=$(docker network create "${args[@]}" --subnet "$v4" --gateway "$gw" --ipv6 --subnet "$v6" "$net" 2>&1) && {
          log "created docker network $net (IPv4 $v4, IPv6 $v6)"
          return 0
        }
      else
        out=$(docker network create "${args[@]}" --subnet "$v4" --gateway "$gw" "$net" 2>&1) && {
          log "created docker network $net (IPv4 $v4; no IPv6 in this engine)"
          return 0
        }
      fi
      case $out in
        *"Cannot read IPv6 setup for bridge"* | *"iptables failed: ip6tables"*) ipv6=false ;;
        *"already exists"*) return 0 ;;
        *"Pool overlaps"* | *"networks have overlapping"*)
          # Either subnet may be the one taken: kind's ULA has five tries, the IPv4 pools many.
          if $ipv6 && ((attempt < 4)) && ! ipv4_subnet_taken "$v4"; then
            attempt=$((attempt + 1))
          else
            break
          fi
          ;;
        *) die "docker network create $net: $out" ;;
      esac
    done
  done
  die "no free subnet for docker network $net (last answer: $out)"
}

# ipv4_candidates: Docker's default local address pools, in its order.
ipv4_candidates() {
  local i
  for ((i = 18; i <= 31; i++)); do printf '172.%d.0.0/16\n' "$i"; done
  for ((i = 0; i <= 240; i += 16)); do printf '192.168.%d.0/20\n' "$i"; done
}

# ipv4_subnet_taken CIDR: whether another docker network holds exactly CIDR.
ipv4_subnet_taken() {
  local ids
  mapfile -t ids < <(docker network ls -q)
  docker network inspect "${ids[@]}" -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null |
    tr ' ' '\n' | grep -qxF "$1"
}

# first_host_address A.B.C.D/N: the lowest address of the subnet but its network address.
first_host_address() {
  local ip=${1%/*} bits=${1#*/} a b c d n
  IFS=. read -r a b c d <<<"$ip"
  n=$(((a << 24 | b << 16 | c << 8 | d) & ~((1 << (32 - bits)) - 1) & 0xffffffff))
  n=$((n + 1))
  printf '%d.%d.%d.%d' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))
}

# last_host_address A.B.C.D/N: the highest address of the subnet but its broadcast.
last_host_address() {
  local ip=${1%/*} bits=${1#*/} a b c d n
  IFS=. read -r a b c d <<<"$ip"
  n=$(((a << 24 | b << 16 | c << 8 | d) | ((1 << (32 - bits)) - 1)))
  n=$((n - 1))
  printf '%d.%d.%d.%d' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))
}

# ula_subnet NAME ATTEMPT: kind's generateULASubnetFromName: fc00 followed by bytes 2..7 of
# sha1(NAME + ATTEMPT as 32-bit little endian), as a /64.
ula_subnet() {
  local h
  h=$({
    printf '%s' "$1"
    printf '%b' "\\x$(printf %02x $(($2 & 255)))\\x$(printf %02x $((($2 >> 8) & 255)))\\x00\\x00"
  } | sha1sum | cut -c5-16)
  printf 'fc00:%x:%x:%x::/64\n' "0x${h:0:4}" "0x${h:4:4}" "0x${h:8:4}"
}

#!/usr/bin/env bash
# What high availability costs, side by side on the test bed: `bootstrap kubeadm-capd` with the
# environment's one control plane machine and one worker, and with three control plane machines
# and two workers (environment-values/kubeadm-capd/ha.values.yaml), alternately, each from a clean
# state, RUNS times. For each run: the wall time of the bootstrap with the pivot, the peak RSS of
# the bootstrap process, the peak of the machine's used memory above what it used before (kind,
# the new cluster's containers and the process, together), and the memory of the self-managed
# cluster's containers at the end (docker stats).
#
# Usage: ci/bench-ha.sh             (needs the test bed: tools/testbed/up --no-cluster)
# Environment:
#   RUNS       number of pairs [1]
#   BENCH_OUT  where the logs and results go [~/.cache/cluster-init/bench/ha-DATE]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${CLUSTER_INIT_CACHE:-$HOME/.cache/cluster-init}
RUNS=${RUNS:-1}
OUT=${BENCH_OUT:-$CACHE/bench/ha-$(date +%Y%m%d-%H%M%S)}
VALUES=$CACHE/testbed-values.yaml
ENV=kubeadm-capd
HA=environment-values/$ENV/ha.values.yaml

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -f $VALUES ]] || die "no $VALUES: start the test bed first (tools/testbed/up --no-cluster)"
[[ -f $HA ]] || die "no $HA"
mkdir -p "$OUT"
export CLUSTER_INIT_STATE_DIR=$OUT/state
go build -o "$OUT/bootstrap" ./cmd/bootstrap
tools/image/build >/dev/null 2>&1

quiet() { "$OUT/bootstrap" cleanup "$ENV" >/dev/null 2>&1 || true; }
trap quiet EXIT

used_kib() { awk '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 } END { print t - a }' /proc/meminfo; }

# measure NAME ARGS...: one bootstrap, sampled every 2 s; appends a line to results.tsv.
measure() {
  local name=$1 log=$OUT/$1.log
  shift
  quiet
  sleep 10
  local before peak_used=0 peak_rss=0 t0 t1 pid
  before=$(used_kib)
  t0=$(date +%s.%N)
  "$OUT/bootstrap" "$ENV" --repo "$REPO" --values "$VALUES" "$@" --output plain >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local u r
    u=$(used_kib)
    r=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    ((u > peak_used)) && peak_used=$u
    ((${r:-0} > peak_rss)) && peak_rss=${r:-0}
    sleep 2
  done
  wait "$pid" || die "the bootstrap ($name) failed: $log"
  t1=$(date +%s.%N)
  local -a containers
  mapfile -t containers < <(docker ps --filter label=io.x-k8s.kind.cluster=management --format '{{.Names}}')
  local cluster_mib
  cluster_mib=$(docker stats --no-stream --format '{{.MemUsage}}' "${containers[@]}" | awk '
    { v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v)
      f = (u == "GiB") ? 1024 : (u == "MiB") ? 1 : (u == "KiB") ? 1 / 1024 : 0; s += v * f }
    END { printf "%.0f", s }')
  printf '%s\t%d\t%.0f\t%d\t%d\t%s\n' "$name" "${#containers[@]}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
    $((peak_rss / 1024)) $(((peak_used - before) / 1024)) "$cluster_mib" >>"$OUT/results.tsv"
  log "$name: $(tail -1 "$OUT/results.tsv")"
}

printf 'run\tcontainers\tbootstrap_s\tbootstrap_peak_rss_mib\tmachine_peak_mib\tcluster_mib_at_end\n' >"$OUT/results.tsv"
for ((i = 1; i <= RUNS; i++)); do
  log "run $i: one control plane machine, one worker"
  measure "1cp-$i"
  log "run $i: three control plane machines, two workers"
  measure "3cp-$i" --values "$HA"
done
quiet
trap - EXIT
echo
column -t -s $'\t' "$OUT/results.tsv"
echo "logs: $OUT"

#!/usr/bin/env bash
# Does FUSE over io_uring lower the FUSE floor? One passthrough daemon, libfuse's passthrough_hp
# (>= 3.18, built by bench/peers.sh passthrough-hp-uring), run over /dev/fuse and over io_uring
# (`-o io_uring`: per-CPU request rings, the daemon thread of the requester's CPU serves it), with
# the plain directory as the limit, interleaved per repetition, medians and ratios.
#
#   bench/uring.sh [REPS]          (default 5) results as a Markdown table on stdout
#
# Workloads: untar of the Linux subset (cold cache), create 10k small files, stat walk of the
# subset (cold), first write of 10k small files (median latency of open + write + close, from
# bench/smallfiles.py), rm -rf of the subset. ckpt-mount cannot run over io_uring (fuser 0.18 has
# no such transport), so this measures the transport, not ckpt-mount: what it could gain.
#
# Sets the fuse module's `enable_uring` parameter to Y for the run and puts back its old value.
# Needs root. Runs on a fresh journaled ext4 loop image, as bench/run.sh does by default.
# Environment: FIX (fixtures, as bench/run.sh), WORK=/tmp/ckpt-uring-work, PASSTHROUGH_HP_URING.
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-5}"
fix="${FIX:-/tmp/ckpt-bench-fixtures}"
work="${WORK:-/tmp/ckpt-uring-work}"
param=/sys/module/fuse/parameters/enable_uring
die() { echo "uring.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (enable_uring, drop_caches, loop mount)"
[ -w "$param" ] || die "$param missing or not writable: this kernel has no FUSE over io_uring"
[ -f "$fix/linux-sub.tar" ] || die "no $fix/linux-sub.tar (make the fixtures: ../shared/bench/fixtures.sh)"
pt="${PASSTHROUGH_HP_URING:-$(bash bench/peers.sh passthrough-hp-uring)}"
[ -x "$pt" ] || die "no passthrough_hp binary ($pt)"

old_param="$(cat "$param")"
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then fusermount3 -u "$work/fs/mnt" 2>/dev/null || kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; fi
  mountpoint -q "$work/fs" && umount "$work/fs"
  rm -rf "$work"
  echo "$old_param" > "$param"
}
trap cleanup EXIT
echo Y > "$param"
mkdir -p "$work/fs"
truncate -s 8G "$work/fs.img"
mkfs.ext4 -q -F "$work/fs.img"
mount -o loop "$work/fs.img" "$work/fs"
F="$work/fs"

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# the workload's tree, made in the plain directory before the mount (untar and create need none)
setup() {
  case "$1" in
    stat|rm) tar -xf "$fix/linux-sub.tar" -C "$F/src" ;;
    firstwrite) python3 bench/smallfiles.py create "$F/src/small" 10000 ;;
  esac
}
# run workload $1 in folder $2; prints the figure (seconds, or µs for firstwrite)
run() {
  local t0 t1
  t0="$EPOCHREALTIME"
  case "$1" in
    untar) tar -xf "$fix/linux-sub.tar" -C "$2" ;;
    create) python3 bench/smallfiles.py create "$2/small" 10000 ;;
    stat) find "$2" -printf '%s\n' > /dev/null ;;
    rm) rm -rf "${2:?}"/* ;;
    firstwrite) python3 bench/smallfiles.py touch "$2/small" "$work/touch.txt"
                awk '$1 == "median_us" { print $2 }' "$work/touch.txt"; return ;;
  esac
  t1="$EPOCHREALTIME"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

start() { # transport: devfuse | uring
  local opts=()
  [ "$1" = uring ] && opts=(-o io_uring)
  "$pt" --foreground "${opts[@]}" "$F/src" "$F/mnt" > "$work/daemon.out" 2>&1 &
  daemon=$!

  for _ in $(seq 50); do mountpoint -q "$F/mnt" && break; sleep 0.1; done
  mountpoint -q "$F/mnt" || die "passthrough_hp did not mount: $(head -c 300 "$work/daemon.out")"
  stat "$F/mnt" > /dev/null
  # libfuse starts one "fuse-ring-N" thread per CPU queue; without them it is on /dev/fuse
  local rings
  rings="$(cat /proc/"$daemon"/task/*/comm 2>/dev/null | grep -c '^fuse-ring-' || true)"
  if [ "$1" = uring ] && [ "$rings" = 0 ]; then die "-o io_uring given, but no io_uring queue threads"; fi
  if [ "$1" = devfuse ] && [ "$rings" != 0 ]; then die "io_uring queue threads without -o io_uring"; fi
}
stop() {
  fusermount3 -u "$F/mnt"
  wait "$daemon" 2>/dev/null || true
  daemon=""
}

workloads=(untar create stat firstwrite rm)
variants=(native devfuse uring)
declare -A res
echo "uring.sh: $reps repetitions, $(nproc) CPUs, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for w in "${workloads[@]}"; do
  for r in $(seq "$reps"); do
    for v in "${variants[@]}"; do
      rm -rf "${F:?}/src" "${F:?}/mnt"; mkdir -p "$F/src" "$F/mnt"
      setup "$w"
      drop_caches
      dir="$F/src"
      if [ "$v" != native ]; then start "$v"; dir="$F/mnt"; fi
      x="$(run "$w" "$dir")"
      [ "$v" != native ] && stop
      res["$w $v"]+="$x "
      echo "uring.sh: $w $v rep $r: $x" >&2
    done
  done
done

median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "# FUSE over io_uring against /dev/fuse: $(cat "${pt}.info" 2>/dev/null || echo "$pt")"
echo
echo "$reps repetitions, interleaved; $(nproc) CPUs; kernel $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC')."
echo "Seconds, except the first write (median µs of open + write + close over 10k files)."
echo
echo "| workload | native | /dev/fuse | io_uring | /dev/fuse ÷ native | io_uring ÷ native | io_uring ÷ /dev/fuse |"
echo "|---|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
  n="$(echo "${res["$w native"]}" | median)"
  d="$(echo "${res["$w devfuse"]}" | median)"
  u="$(echo "${res["$w uring"]}" | median)"
  awk -v w="$w" -v n="$n" -v d="$d" -v u="$u" \
    'BEGIN { printf "| %s | %s | %s | %s | %.2f× | %.2f× | %.2f× |\n", w, n, d, u, d / n, u / n, u / d }'
done
echo
echo "Every repetition, in order:"
echo
for w in "${workloads[@]}"; do
  echo "- $w: native ${res["$w native"]% }; /dev/fuse ${res["$w devfuse"]% }; io_uring ${res["$w uring"]% }"
done

#!/usr/bin/env bash
# FUSE requests per workload, counted by the kernel's own tracepoint (fuse:fuse_request_send)
# and filtered to the one mount under test, so the counts are exact whatever else runs on the
# machine: the deterministic side of a lever that saves round trips (wall times are
# bench/run.sh's). Needs root (tracefs).
#
#   bench/requests.sh [BIN] [-- MOUNT-ARGS...]
#
# Workloads: rm -rf of 1,000 files (each captured), creating 1,000 empty files, untar of 300,
# and the first write of 1,000 existing small files in a turn (open r+b, write 1 byte, close:
# bench/run.sh's firstwrite, each captured), then the same loop again (second writes).
set -euo pipefail
BIN=${1:-target/release/ckpt-mount}
shift || true
[ "${1:-}" = "--" ] && shift
T=/sys/kernel/tracing/instances/ckpt-requests
mkdir -p "$T"
WORK=$(mktemp -d /tmp/ckpt-requests.XXXXXX)
trap 'echo 0 > "$T/tracing_on"; rmdir "$T" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir "$WORK/st"
for i in $(seq 300); do echo y > "$WORK/st/g$i"; done
tar -C "$WORK" -cf "$WORK/small.tar" st
# One process writes every file, as bench/run.sh's firstwrite loop does.
cat > "$WORK/writes.py" <<'PY'
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    with open(os.path.join(d, n), "r+b") as f:
        f.write(b"y")
PY

count() { # WORKLOAD: one line of counts per opcode
  local d="$WORK/m" wl=$1
  shift
  rm -rf "$d"; mkdir -p "$d"
  if [ "$wl" = rm-rf ]; then mkdir "$d/t"; for i in $(seq 1000); do echo x > "$d/t/f$i"; done; fi
  if [ "$wl" = firstwrite ] || [ "$wl" = secondwrite ]; then
    mkdir "$d/w"; for i in $(seq 1000); do printf '%0100d' 0 > "$d/w/f$i"; done
  fi
  "$BIN" mount "$d" "$@" >/dev/null
  (
    cd "$d"
    echo 2 > .ckpt/turn
    # secondwrite: the files are captured in this turn already (untraced), then written again.
    [ "$wl" = secondwrite ] && python3 "$WORK/writes.py" w
    # The connection id is the kernel's dev_t of the mount: MAJOR << 20 | MINOR.
    local dev maj min
    dev=$(stat -c %d .); maj=$(( (dev >> 8) & 0xfff )); min=$(( (dev & 0xff) | ((dev >> 12) & 0xfff00) ))
    echo "connection == $(( (maj << 20) | min ))" > "$T/events/fuse/fuse_request_send/filter"
    echo > "$T/trace"; echo 1 > "$T/events/fuse/fuse_request_send/enable"; echo 1 > "$T/tracing_on"
    case $wl in
      rm-rf) rm -rf t ;;
      create) mkdir c; for i in $(seq 1000); do : > "c/f$i"; done ;;
      untar) tar xf "$WORK/small.tar" ;;
      firstwrite | secondwrite) python3 "$WORK/writes.py" w ;;
    esac
    echo 0 > "$T/tracing_on"
  )
  "$BIN" unmount "$d" >/dev/null
  local total
  total=$(grep -c "FUSE_" "$T/trace" || true)
  printf '%-7s %6d  %s\n' "$wl" "$total" \
    "$(grep -o '(FUSE_[A-Z_]*)' "$T/trace" | sort | uniq -c | sort -rn | awk '{printf "%s %s  ", $2, $1}' | tr -d '()')"
}
for wl in rm-rf create untar firstwrite secondwrite; do count "$wl" "$@"; done

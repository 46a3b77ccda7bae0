#!/usr/bin/env bash
# FUSE requests per workload, counted by the kernel's own tracepoint (fuse:fuse_request_send)
# and filtered to the one mount under test, so the counts are exact whatever else runs on the
# machine: the deterministic side of a lever that saves round trips (wall times are
# bench/run.sh's). Needs root (tracefs).
#
#   bench/requests.sh [BIN] [-- MOUNT-ARGS...]
#   PEER=bindfs bench/requests.sh [-- BINDFS-ARGS...]   (the same workloads through bindfs)
#   PEER=passthrough_hp PTHP=BIN bench/requests.sh [-- ARGS...]   (through libfuse's
#     passthrough_hp, e.g. the one bench/run.sh built: /tmp/ckpt-bench-work/bin/passthrough_hp)
#
# Workloads: rm -rf of 1,000 files (each captured), creating 1,000 empty files, untar of 300,
# and the first write of 1,000 existing small files in a turn (open r+b, write 1 byte, close:
# bench/run.sh's firstwrite, each captured), then the same loop again (second writes); with
# ONLY=pip (or ONLY="rm-rf pip ...") `python3 -m venv` and `pip install` of the agent fixture's
# wheels (bench/fixtures-agent.sh; FIX as bench/run.sh), bench/run.sh's pip workload; with
# ONLY=npm, `npm ci --offline` of the fixture's lock file from a copy of its warm cache,
# bench/run.sh's npm-ci workload; with ONLY=cargo, the incremental `cargo build` of the agent
# fixture's crate after touching src/lib.rs (its first build made in the mount untraced),
# bench/run.sh's cargo-incr step.
set -euo pipefail
FIX=${FIX:-/tmp/ckpt-bench-fixtures}
PEER=${PEER:-}
BIN=${1:-target/release/ckpt-mount}
shift || true
[ "${1:-}" = "--" ] && shift
T=/sys/kernel/tracing/instances/ckpt-requests
mkdir -p "$T"
# Large enough that no event of a long workload (pip: ~200,000 requests) is overwritten.
echo 65536 > "$T/buffer_size_kb"
WORK=$(mktemp -d /tmp/ckpt-requests.XXXXXX)
trap 'echo 0 > "$T/tracing_on"; echo 0 > "$T/events/fuse/enable"; rmdir "$T" 2>/dev/null || true; rm -rf "$WORK"' EXIT
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

# Time from each request's send to its end (the kernel's timestamps), summed per opcode: where
# the workload waits on the server. Requests never answered (FORGET) have no end.
cat > "$WORK/waits.py" <<'PY'
import re, sys
start, kind, ms, each = {}, {}, {}, {}
pat = re.compile(r" ([0-9.]+): fuse_request_(send|end): connection \d+ req (\d+)(?: opcode \d+ \((\w+)\))?")
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    t, what, req, op = float(m.group(1)), m.group(2), m.group(3), m.group(4)
    if what == "send":
        start[req], kind[req] = t, op
    elif req in start:
        k = kind.pop(req).replace("FUSE_", "")
        d = (t - start.pop(req)) * 1000
        ms[k] = ms.get(k, 0.0) + d
        each.setdefault(k, []).append(d)
def p50(k):
    v = sorted(each[k])
    return v[len(v) // 2] * 1000
print("waited %.0f ms (per opcode: total ms, median µs): " % sum(ms.values()) + "  ".join(
    "%s %.0f (%.0f)" % (k, v, p50(k)) for k, v in sorted(ms.items(), key=lambda kv: -kv[1])))
PY

# bench/run.sh's cargo build (`cargo_build`, `CRATE_DIR`), from the file that defines it: the
# fixture's toolchain, offline, a cargo home of its own under $RUN.
RUN="$WORK"
# shellcheck source=bench/workloads-agent.sh
. "$(dirname "$0")/workloads-agent.sh"

count() { # WORKLOAD: one line of counts per opcode
  local d="$WORK/m" wl=$1
  shift
  rm -rf "$d"; mkdir -p "$d"
  if [ "$wl" = rm-rf ]; then mkdir "$d/t"; for i in $(seq 1000); do echo x > "$d/t/f$i"; done; fi
  if [ "$wl" = firstwrite ] || [ "$wl" = secondwrite ]; then
    mkdir "$d/w"; for i in $(seq 1000); do printf '%0100d' 0 > "$d/w/f$i"; done
  fi
  if [ "$wl" = pip ]; then cp "$FIX/requirements.txt" "$d/"; fi
  if [ "$wl" = cargo ]; then cp -a "$FIX/crate/$CRATE_DIR" "$d/$CRATE_DIR"; fi
  if [ "$wl" = npm ]; then
    cp "$FIX/npmtree/package.json" "$FIX/npmtree/package-lock.json" "$d/"
    rm -rf "$WORK/npm-cache"; cp -a "$FIX/npm-cache" "$WORK/npm-cache"
  fi
  if [ "$PEER" = bindfs ] || [ "$PEER" = passthrough_hp ]; then
    mkdir -p "$d.src"; rm -rf "$d.src"; mv "$d" "$d.src"; mkdir "$d"
    if [ "$PEER" = bindfs ]; then bindfs --no-allow-other "$@" "$d.src" "$d"
    else
      "${PTHP:?PTHP=passthrough_hp binary}" --foreground "$@" "$d.src" "$d" &
      for _ in $(seq 100); do mountpoint -q "$d" && break; sleep 0.05; done
    fi
  else
    "$BIN" mount "$d" "$@" >/dev/null
  fi
  (
    cd "$d"
    [ -n "$PEER" ] || echo 2 > .ckpt/turn
    # secondwrite: the files are captured in this turn already (untraced), then written again.
    [ "$wl" = secondwrite ] && python3 "$WORK/writes.py" w
    # cargo: the first build (untraced), then the touch the incremental build answers.
    if [ "$wl" = cargo ]; then (cd "$CRATE_DIR" && cargo_build) && touch "$CRATE_DIR/src/lib.rs"; fi
    # The connection id is the kernel's dev_t of the mount: MAJOR << 20 | MINOR.
    local dev maj min
    dev=$(stat -c %d .); maj=$(( (dev >> 8) & 0xfff )); min=$(( (dev & 0xff) | ((dev >> 12) & 0xfff00) ))
    local conn=$(( (maj << 20) | min ))
    echo "connection == $conn" > "$T/events/fuse/fuse_request_send/filter"
    echo "connection == $conn" > "$T/events/fuse/fuse_request_end/filter"
    echo > "$T/trace"
    echo 1 > "$T/events/fuse/fuse_request_send/enable"; echo 1 > "$T/events/fuse/fuse_request_end/enable"
    echo 1 > "$T/tracing_on"
    case $wl in
      rm-rf) rm -rf t ;;
      create) mkdir c; for i in $(seq 1000); do : > "c/f$i"; done ;;
      untar) tar xf "$WORK/small.tar" ;;
      firstwrite | secondwrite) python3 "$WORK/writes.py" w ;;
      pip)
        env -u PIP_FIND_LINKS -u PYTHONDONTWRITEBYTECODE PIP_CONFIG_FILE=/dev/null python3 -m venv .venv
        env -u PIP_FIND_LINKS -u PYTHONDONTWRITEBYTECODE PIP_CONFIG_FILE=/dev/null \
          .venv/bin/pip install -q --no-index --find-links "$FIX/wheels" --no-cache-dir \
          --disable-pip-version-check -r requirements.txt
        echo "entries in .venv: $(find .venv | wc -l)" >&2 ;;
      cargo) (cd "$CRATE_DIR" && cargo_build) ;;
      npm)
        NPM_CONFIG_USERCONFIG=/dev/null npm ci --offline --cache "$WORK/npm-cache" --no-audit \
          --no-fund --ignore-scripts --no-update-notifier --loglevel=warn
        echo "files in node_modules: $(find node_modules -type f | wc -l)" >&2 ;;
    esac
    echo 0 > "$T/tracing_on"
  )
  if [ -n "$PEER" ]; then
    fusermount3 -u "$d"; wait; rm -rf "$d.src"
  else
    "$BIN" unmount "$d" >/dev/null
  fi
  local total
  total=$(grep -c "FUSE_" "$T/trace" || true)
  printf '%-7s %6d  %s\n' "$wl" "$total" \
    "$(grep -o '(FUSE_[A-Z_]*)' "$T/trace" | sort | uniq -c | sort -rn | awk '{printf "%s %s  ", $2, $1}' | tr -d '()')"
  # Time from each request's send to its end (the kernel's timestamps), summed per opcode: where
  # the workload waits on the server. Requests the server never answers (FORGET) have no end.
  printf '%-7s %s\n' "" "$(python3 "$WORK/waits.py" "$T/trace")"
}
for wl in ${ONLY:-rm-rf create untar firstwrite secondwrite}; do count "$wl" "$@"; done

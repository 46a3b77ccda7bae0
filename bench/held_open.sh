#!/usr/bin/env bash
# Removals while other files are held open: `rm -rf` of a tree (every file captured) inside the
# mount while another process holds H other files open read-only, for H = 1 and H = HELD, one
# or more binaries, interleaved, R rounds. Each unlink asks whether its file is held open.
#   bench/held_open.sh [HELD] [R] [BINARY...]      (defaults: 10000, 2, target/release/ckpt-mount)
# The tree is the Linux subset fixture (FIX, as bench/run.sh) or, without it, 10,000 small files.
set -euo pipefail
cd "$(dirname "$0")/.."
held="${1:-10000}"; rounds="${2:-2}"; shift 2 2>/dev/null || shift $#
bins=("$@"); [ ${#bins[@]} -gt 0 ] || bins=(target/release/ckpt-mount)
[ -x "${bins[0]}" ] || cargo build --release -q
[ "$(ulimit -n)" -gt $((held + 64)) ] || { echo "held_open.sh: ulimit -n is $(ulimit -n), too low to hold $held files" >&2; exit 1; }
fix="${FIX:-/tmp/ckpt-bench-fixtures}"
work="$(mktemp -d /tmp/ckpt-held-XXXXXX)"
holder=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
  for b in "${bins[@]}"; do "$b" unmount "$work/d" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fill() { # N DIR: N small files
  python3 -c "import os,sys
os.makedirs(sys.argv[2], exist_ok=True)
for i in range(int(sys.argv[1])): open(f'{sys.argv[2]}/f{i:06}','w').write('held file %d\n' % i)" "$1" "$2"
}

one() { # BINARY HELD -> seconds of the rm -rf
  local bin="$1" h="$2" t0 t1
  rm -rf "$work/d"; mkdir -p "$work/d"
  if [ -f "$fix/linux-sub.tar" ]; then tar -C "$work/d" -xf "$fix/linux-sub.tar"; mv "$work/d"/linux* "$work/d/tree"
  else fill 10000 "$work/d/tree"; fi
  fill "$h" "$work/d/held"
  "$bin" mount "$work/d" >/dev/null
  echo 2 > "$work/d/.ckpt/turn"
  # The holder opens every file, says how many, and keeps them until it is killed.
  python3 -c "import os,sys,time
d=sys.argv[1]
fs=[open(os.path.join(d,n),'rb') for n in sorted(os.listdir(d))]
print(len(fs), flush=True)
time.sleep(3600)" "$work/d/held" > "$work/holding" &
  holder=$!
  until [ -s "$work/holding" ]; do kill -0 "$holder" || { echo "held_open.sh: the holder died" >&2; exit 1; }; sleep 0.1; done
  t0="$EPOCHREALTIME"; rm -rf "$work/d/tree"; t1="$EPOCHREALTIME"
  kill "$holder"; wait "$holder" 2>/dev/null || true; holder=""; rm -f "$work/holding"
  "$bin" unmount "$work/d" >/dev/null
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

echo "rm -rf inside the mount while another process holds files open (load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| binary | files held | rm -rf, s (each round) |"
echo "|---|---|---|"
declare -A res
for r in $(seq "$rounds"); do
  for b in "${bins[@]}"; do
    for h in 1 "$held"; do res["$b $h"]+="$(one "$b" "$h") "; done
  done
done
for b in "${bins[@]}"; do
  for h in 1 "$held"; do echo "| $b | $h | ${res["$b $h"]}|"; done
done

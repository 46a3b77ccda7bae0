#!/usr/bin/env bash
# Cost of --durable (blob, shard/pack and journal synced before each mutation proceeds):
# first write of a small file (each one captured), native vs ckpt-mount vs ckpt-mount --durable,
# interleaved, median µs per file over N files, R rounds.
#   bench/durable.sh [N] [R]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-2000}"; rounds="${2:-3}"
bin="${CKPT_BIN:-target/release/ckpt-mount}"
[ -x "$bin" ] || cargo build --release -q
work="$(mktemp -d /tmp/ckpt-durable-XXXXXX)"
trap '"$bin" unmount "$work/d" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
loop() {
  python3 - "$1" "$n" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
ts = []
for i in range(n):
    t = time.perf_counter()
    with open(f"{d}/s{i}", "r+b") as f:
        f.write(b"x")
    ts.append(time.perf_counter() - t)
ts.sort()
print(f"{ts[len(ts)//2]*1e6:.0f}")
PY
}
fresh() {
  rm -rf "$work/d"; mkdir -p "$work/d"
  python3 -c "import sys
for i in range(int(sys.argv[2])): open(f'{sys.argv[1]}/s{i}','w').write('small file %d\n'%i)" "$work/d" "$n"
}
declare -A res
for r in $(seq "$rounds"); do
  for v in native ckpt durable; do
    fresh
    case $v in
      native) res[$v]+="$(loop "$work/d") " ;;
      ckpt) "$bin" mount "$work/d" >/dev/null; echo 2 > "$work/d/.ckpt/turn"; res[$v]+="$(loop "$work/d") "; "$bin" unmount "$work/d" >/dev/null ;;
      durable) "$bin" mount "$work/d" --durable >/dev/null; echo 2 > "$work/d/.ckpt/turn"; res[$v]+="$(loop "$work/d") "; "$bin" unmount "$work/d" >/dev/null ;;
    esac
  done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
nat=$(med "${res[native]}"); ck=$(med "${res[ckpt]}"); du=$(med "${res[durable]}")
echo "first write of a small file, median µs over $n files, median of $rounds rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| variant | µs per first write | added over native |"
echo "|---|---|---|"
echo "| native | $nat | – |"
echo "| ckpt-mount (default) | $ck | $((ck - nat)) |"
echo "| ckpt-mount --durable | $du | $((du - nat)) |"

#!/usr/bin/env bash
# Store bytes after a full-tree turn (every file captured), raw and zstd-compressed, against
# git's object store for the same tree. Sizes, not times: a loaded machine does not skew them.
#   bench/store_size.sh [TREE]      (default: the npm fixture tree from fixtures.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:-${FIX:-/tmp/ckpt-bench-fixtures}/npmtree}"
bin="${CKPT_BIN:-target/release/ckpt-mount}"
[ -x "$bin" ] || cargo build --release -q
[ -d "$tree" ] || { echo "no tree at $tree (run ../shared/bench/fixtures.sh)" >&2; exit 1; }
work="$(mktemp -d /tmp/ckpt-size-XXXXXX)"
trap 'for d in "$work"/*; do "$bin" unmount "$d" >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
files=$(find "$tree" -type f | wc -l)
raw=$(find "$tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
row() { printf '| %s | %s | %.1f MB | %.2f |\n' "$1" "$2" "$(echo "$3/1000000" | bc -l)" "$(echo "$3/$raw" | bc -l)"; }
echo "tree: $tree ($files files, $raw bytes)"
echo
echo "| store | how | bytes | of raw |"
echo "|---|---|---|---|"
row "raw file bytes" "sum of file sizes" "$raw"
for mode in plain compress; do
  d="$work/$mode"
  cp -a "$tree" "$d"
  args=()
  [ "$mode" = compress ] && args=(--compress)
  "$bin" mount "$d" "${args[@]}" >/dev/null
  echo 2 > "$d/.ckpt/turn"
  # A full-tree turn: every file is touched once, so every file is captured.
  (cd "$d" && find . -path ./.ckpt -prune -o -type f -print0 | xargs -0 touch)
  "$bin" unmount "$d" >/dev/null
  b=$(du -sb "$d/.ckpt/blobs" | cut -f1)
  row "ckpt-mount blobs" "$mode (du -sb .ckpt/blobs)" "$b"
done
g="$work/git"
cp -a "$tree" "$g"
(cd "$g" && git init -q . && git add -A >/dev/null 2>&1)
row "git objects" "git add -A (zlib loose objects, du -sb .git/objects)" "$(du -sb "$g/.git/objects" | cut -f1)"
(cd "$g" && git gc -q >/dev/null 2>&1 || true)
row "git objects after gc" "packed (delta + zlib)" "$(du -sb "$g/.git/objects" | cut -f1)"

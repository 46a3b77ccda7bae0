#!/usr/bin/env bash
# hardlink_same_bytes.sh DIR — a hard-link group (f, g) split by `rewind 4` then `rewind 3` on root's mount.
# Turn 3 removes f; turn 4 replaces g by a new inode with the very bytes it held (what
# `git checkout -- .` does to a file it rewrites); `rewind 4` finds g "unchanged" and records no
# renewal, so `rewind 3` cannot find f's inode (nlink 2) under g and restores f alone.
set -u
B=${BIN:-ckpt-mount}; D=${1:?usage: $0 DIR}
cd /; "$B" unmount "$D" >/dev/null 2>&1; rm -rf "$D"; mkdir -p "$D"
"$B" mount "$D" >/dev/null || { echo "mount failed"; exit 1; }
cd "$D" || exit 1
echo 2 > .ckpt/turn; echo data > f; ln f g
echo 3 > .ckpt/turn; rm f
echo 4 > .ckpt/turn; cp g g.tmp && mv g.tmp g
cd /
"$B" rewind 4 --dir "$D" --yes >/dev/null 2>&1
"$B" rewind 3 --dir "$D" --yes >/dev/null 2>&1; rc=$?
links=$(stat -c '%h' "$D/f" "$D/g" 2>&1 | tr '\n' ' '); same=$([ "$D/f" -ef "$D/g" ] && echo yes || echo no)
"$B" unmount "$D" >/dev/null 2>&1
if [ "$same" = yes ] && [ $rc -eq 0 ]; then echo EXACT; else echo "NOT EXACT (rewind 3 exit $rc): f and g one inode: $same; links: $links"; fi

#!/usr/bin/env bash
# hardlink_failed_rename.sh DIR — a rename of a tree holding a hard-link group fails (the target
# directory is not empty) but is captured; the rewind must leave the group as it is (its inode
# and mtime: no turn changed it), not rewrite it in place. Found by the randomized shell turns
# (`cp -al`, then `mv d-links/obj d/` failing). Last line: EXACT or NOT EXACT. BIN: the binary.
set -u
B=${BIN:-ckpt-mount}; D=${1:?usage: $0 DIR}
cd /; "$B" unmount "$D" >/dev/null 2>&1; rm -rf "$D"; mkdir -p "$D/a/obj" "$D/b/obj"
echo x > "$D/a/obj/f"; ln "$D/a/obj/f" "$D/a/obj/g"; echo y > "$D/b/obj/h"
"$B" mount "$D" >/dev/null || { echo "mount failed"; exit 1; }
cd "$D" || exit 1
echo 2 > .ckpt/turn
before=$(stat -c '%i %Y.%y %h' a/obj/f)
sleep 1.1
mv a/obj b/ 2>/dev/null && { echo "NOT EXACT: the rename was expected to fail"; exit 0; }
cd /
"$B" rewind 2 --dir "$D" --yes >/dev/null; rc=$?
after=$(stat -c '%i %Y.%y %h' "$D/a/obj/f")
"$B" unmount "$D" >/dev/null
if [ "$before" = "$after" ] && [ $rc -eq 0 ]; then echo EXACT
else echo "NOT EXACT (rewind exit $rc): a/obj/f was [$before], is [$after]"; fi

#!/usr/bin/env bash
# deep_tree.sh DIR — a tree deeper than PATH_MAX (made on the host, then renamed through the
# mount) is rewound, partially rewound and undone exactly: every step either restores it through
# a chain of descriptors or refuses before changing anything; nothing is deleted that cannot be
# put back. Last line: EXACT or NOT EXACT. BIN: the binary (default ckpt-mount on the PATH).
set -u
B=${BIN:-ckpt-mount}; D=${1:?usage: $0 DIR}
cd /; "$B" unmount "$D" >/dev/null 2>&1; rm -rf "$D"; mkdir -p "$D"; cd "$D" || exit 1
# 25 levels of 210-byte names: about 5,300 bytes, past the 4,096 of PATH_MAX.
python3 - <<'PY'
import os
os.mkdir('deep'); fd = os.open('deep', os.O_RDONLY)
for i in range(25):
    name = ('d%02d' % i) * 70
    os.mkdir(name, dir_fd=fd); nfd = os.open(name, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nfd
with open(os.open('leaf.txt', os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd), 'w') as f:
    f.write('the leaf\n')
os.symlink('leaf.txt', 'link', dir_fd=fd)
PY
# What a top-level tree holds, at any depth: each entry's depth, type, mode and bytes.
state() { python3 - "$1" <<'PY'
import hashlib, os, stat, sys
top = sys.argv[1]
if not os.path.lexists(top):
    print('absent'); sys.exit()
out = []
for root, dirs, files, fd in os.fwalk(top):
    for n in sorted(dirs + files):
        st = os.lstat(n, dir_fd=fd)
        body = os.readlink(n, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else ''
        if stat.S_ISREG(st.st_mode):
            with open(os.open(n, os.O_RDONLY, dir_fd=fd), 'rb') as f:
                body = hashlib.sha256(f.read()).hexdigest()
        out.append('%d %s %o %s' % (root.count('/') - top.count('/'), n[:3], st.st_mode, body))
print(len(out), hashlib.sha256('\n'.join(sorted(out)).encode()).hexdigest())
PY
}
s0=$(state deep)
cd /; "$B" mount "$D" >/dev/null || { echo "mount failed"; exit 1; }
cd "$D" || exit 1
echo 2 > .ckpt/turn
mv deep moved
cd /
bad=""
check() { [ "$2" = "$3" ] || bad="$bad; $1: [$3], want [$2]"; }
"$B" rewind 2 --dir "$D" --yes -- moved >/dev/null 2>&1; rc=$?
[ $rc -eq 0 ] && check "rewind 2 -- moved, moved" "absent" "$(state "$D/moved")"
[ $rc -eq 0 ] || check "rewind 2 -- moved refused, moved" "$s0" "$(state "$D/moved")"
"$B" undo --dir "$D" >/dev/null 2>&1 || bad="$bad; undo of the partial rewind exited $?"
check "after the undo, moved" "$s0" "$(state "$D/moved")"
"$B" rewind 2 --dir "$D" --yes >/dev/null 2>&1 || bad="$bad; rewind 2 exited $?"
check "after rewind 2, deep" "$s0" "$(state "$D/deep")"
check "after rewind 2, moved" "absent" "$(state "$D/moved")"
"$B" undo --dir "$D" >/dev/null 2>&1 || bad="$bad; undo of rewind 2 exited $?"
check "after its undo, moved" "$s0" "$(state "$D/moved")"
check "after its undo, deep" "absent" "$(state "$D/deep")"
"$B" unmount "$D" >/dev/null 2>&1
if [ -z "$bad" ]; then echo EXACT; else echo "NOT EXACT${bad}"; fi

#!/usr/bin/env bash
# The daemon's memory in a rewind, on its own (no peers, no timing: memory does not depend on
# the machine's load). Usage: bench/rewind_memory.sh BIN N [heaptrack]
# N small files in directories of 1,000 are made, mounted with BIN, all rewritten in turn 2,
# then `rewind 2`; prints the daemon's RSS after turn 2 and its peak (VmHWM) after the rewind.
# With a third argument the daemon runs in the foreground under heaptrack (/tmp/memprobe.ht.zst).
set -e
BIN=$1; N=$2; HT=$3
D=/tmp/memprobe; umount -l $D 2>/dev/null || true; rm -rf $D; mkdir -p $D
python3 - "$D" "$N" <<'PY'
import os,sys
d,n=sys.argv[1],int(sys.argv[2])
for i in range(n):
    sub=os.path.join(d,"d%03d"%(i//1000)); os.makedirs(sub,exist_ok=True)
    open(os.path.join(sub,"f%05d.txt"%i),"w").write("hello %d\n"%i)
PY
if [ -n "$HT" ]; then
  heaptrack -o /tmp/memprobe.ht $BIN mount --foreground $D 2>/tmp/memprobe.err & HP=$!
else
  $BIN mount $D
fi
for i in $(seq 50); do mountpoint -q $D && break; sleep 0.2; done
PID=$(pgrep -f "$BIN mount" | head -1)
echo 2 > $D/.ckpt/turn
python3 - "$D" "$N" <<'PY'
import os,sys
d,n=sys.argv[1],int(sys.argv[2])
for i in range(n):
    p=os.path.join(d,"d%03d"%(i//1000),"f%05d.txt"%i)
    open(p,"w").write("changed %d\n"%i)
PY
grep -E "VmRSS|VmHWM" /proc/$PID/status | tr '\n' ' '; echo " (after turn 2, pid $PID)"
echo 5 > /proc/$PID/clear_refs || true
/usr/bin/time -f "rewind wall %e s, CLI maxrss %M KiB" $BIN rewind 2 --dir $D --yes >/dev/null
grep -E "VmRSS|VmHWM" /proc/$PID/status | tr '\n' ' '; echo " (after rewind)"
$BIN unmount $D || umount -l $D
[ -n "$HT" ] && wait $HP || true

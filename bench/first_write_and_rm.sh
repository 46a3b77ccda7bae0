#!/usr/bin/env bash
# Two ckpt-mount binaries side by side, alternating, on the two workloads attribution touches
# most: the first write of N small files in a turn (latency p50/p99 per open-write-close, and
# the daemon's CPU) and rm -rf of N other files (wall time and the daemon's CPU).
# Usage: bench/first_write_and_rm.sh BIN_BEFORE BIN_AFTER REPS N   (runs in /tmp/attrcost)
set -e
A=$1; B=$2; REPS=$3; N=$4
run() {
  local BIN=$1 D=/tmp/attrcost
  umount -l $D 2>/dev/null || true; rm -rf $D; mkdir -p $D/w $D/r
  python3 - $D $N <<'PY'
import os,sys
d,n=sys.argv[1],int(sys.argv[2])
for sub in ("w","r"):
    for i in range(n):
        open(os.path.join(d,sub,"f%05d"%i),"w").write("x"*100)
PY
  $BIN mount $D >/dev/null
  local PID=$(pgrep -f "$BIN mount" | head -1)
  echo 2 > $D/.ckpt/turn
  local T0=$(awk '{print $14+$15}' /proc/$PID/stat)
  python3 - $D $N <<'PY'
import os,sys,time
d,n=sys.argv[1],int(sys.argv[2])
lat=[]
for i in range(n):
    p=os.path.join(d,"w","f%05d"%i)
    t=time.perf_counter()
    fd=os.open(p,os.O_WRONLY); os.write(fd,b"y"); os.close(fd)
    lat.append(time.perf_counter()-t)
lat.sort()
print("firstwrite p50 %.0f us p99 %.0f us" % (lat[len(lat)//2]*1e6, lat[int(len(lat)*0.99)]*1e6), end="; ")
PY
  local T1=$(awk '{print $14+$15}' /proc/$PID/stat)
  local s=$(date +%s.%N); rm -rf $D/r; local e=$(date +%s.%N)
  local T2=$(awk '{print $14+$15}' /proc/$PID/stat)
  echo "daemon cpu firstwrite $((T1-T0)) ticks; rm -rf $(python3 -c "print('%.2f'%($e-$s))") s, daemon cpu $((T2-T1)) ticks"
  $BIN unmount $D >/dev/null || umount -l $D
}
for r in $(seq $REPS); do
  echo -n "before r$r: "; run $A
  echo -n "after  r$r: "; run $B
done

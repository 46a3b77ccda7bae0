#!/usr/bin/env bash
# bench/run.sh's timer for a step that runs as another user (started through runuser):
#
#   timed.sh OUT DIR CMD...
#
# runs CMD (a program, or a function run.sh exported) in DIR and writes "sec S" (wall seconds)
# and "wcpu C" (CPU seconds of CMD's processes) to OUT, so that runuser's own start is not timed.
# Exit status: CMD's (111 if DIR cannot be entered).
out="$1" dir="$2"
shift 2
cd "$dir" || exit 111
t0="$EPOCHREALTIME"
"$@"
rc=$?
t1="$EPOCHREALTIME"
times > "$out.times"
awk -v a="$t0" -v b="$t1" 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] }
  printf "sec %.6f\nwcpu %.3f\n", b - a, n }' "$out.times" > "$out"
rm -f "$out.times"
exit "$rc"

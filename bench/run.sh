#!/usr/bin/env bash
# ckpt-mount performance baseline: every workload on a plain directory, on bindfs (plain and
# tuned), on libfuse's passthrough_hp (kernel passthrough, 1-day TTLs) and on ckpt-mount with
# capture active, interleaved per repetition, medians as ratios.
#
#   bench/run.sh            full run (5 repetitions, 3 for the long ones; takes a long while)
#   bench/run.sh --quick    smoke check: Linux subset only, 1 repetition, no full tree, no 1 GiB
#
# Options:
#   --quick              see above
#   --reps N             repetitions per workload (default 5; quick 1)
#   --long-reps N        repetitions of the long workloads (default 3; quick 1)
#   --only W[,W...]      run only these workloads (names: see `--list`); a workload named here
#                        runs even if --quick would skip it
#   --list               list the workloads and exit
#   --out FILE           results file (default bench/results/<date>.md, <date>-quick.md for --quick)
#   --no-build           do not run `cargo build --release` (use the binary as it is)
#   --head               build the committed HEAD (git archive into $WORK, own target dir)
#                        instead of the working tree, so the results belong to one commit
#   --rev REV            the same for another commit
#   --resume             continue an interrupted run in $WORK: keep its measurements, skip the
#                        runs it completed (give the same options as the first time)
#
# Environment:
#   FIX=/tmp/ckpt-bench-fixtures   where the fixtures are (made by the fixtures script if missing)
#   FIXTURES_SH=...                the fixtures script (default ../shared/bench/fixtures.sh from the
#                                  repo root, else /work/shared/bench/fixtures.sh); the agent
#                                  workloads' own fixtures (npm cache, Rust toolchain and crate,
#                                  git repository, wheels) are made by bench/fixtures-agent.sh,
#                                  only those the selected workloads need
#   BENCH_USER=ckpt-ci             the unprivileged user of the ckpt-user variant and of the
#                                  workloads that run as a user (it needs rw access to /dev/fuse);
#                                  the variant is dropped, with one line in the log, if it cannot mount
#   CKPT_USER_NOFILE=hard          the user's ckpt-mount daemon starts with its soft RLIMIT_NOFILE
#                                  raised to the hard limit, as root's shell has it here (runuser
#                                  sets 1024, with which the daemon runs out of descriptors in a
#                                  rewind of 16k entries); `session` keeps runuser's limit
#   PYTHON=/usr/bin/python3        the interpreter of every timed python step (for root and the
#                                  user alike: root's own python3 may live where the user cannot read)
#   WORK=/tmp/ckpt-bench-work      scratch space (each run's folders are made and removed here)
#   CKPT=...                       ckpt-mount binary (default target/release/ckpt-mount, built first);
#                                  it is copied to $WORK/bin so a rebuild during the run changes nothing
#   BINDFS=bindfs                  the bindfs binary
#   PASSTHROUGH_HP=...             a passthrough_hp binary; default: built from Debian's fuse3
#                                  source by bench/peers.sh into PEERS_DIR (/tmp/ckpt-bench-peers;
#                                  once, then cached); `none` runs without it. A failed build
#                                  drops the variant with one line in the log, the run goes on
#   PTHP_OPTS="..."                extra passthrough_hp options, e.g. "--nopassthrough" or
#                                  "--num-threads 2" (default: none, so libfuse's defaults)
#   CKPT_MOUNT_OPTS="..."          extra `ckpt-mount mount` options, e.g. "--no-passthrough" or
#                                  "--threads 8 --ttl 1" (to measure a lever against the defaults)
#   KPERM=1                        also run ckpt-kperm: root's ckpt-mount with --kernel-permissions
#                                  (the kernel's permission checks, as before the host-checks lever),
#                                  next to the defaults, on every workload run as root that the peers
#                                  run too: the lever measured side by side, interleaved
#   BASE_BIN=FILE                  also run ckpt-user-base: the user's own mount made by another
#                                  ckpt-mount binary (e.g. the commit before a lever), next to
#                                  ckpt-user on every workload that has it, interleaved: a lever of
#                                  the daemon-served mount measured side by side with what it replaces
#   BENCH_FS=loop                  where the workloads run: `loop` (default) makes a fresh ext4
#                                  image with a journal ($WORK/fs.img, BENCH_FS_SIZE=24G, sparse)
#                                  and mounts it on $WORK/fs; `host` uses $WORK on whatever
#                                  filesystem holds it. Why: on ext4 *without* a journal (as this
#                                  machine's root) every inode allocation skips inodes deleted in
#                                  the last minutes (`recently_deleted`), so a workload that runs
#                                  after a big `rm -rf` is several times slower (native untar of
#                                  the subset: 0.7 s, 3.2 s, 5.5 s in three runs in a row)
#
# Variants: native (the plain folder), bindfs, bindfs-tuned, passthrough-hp, ckpt (ckpt-mount
# mounted by root, with kernel passthrough), ckpt-kperm (the same with --kernel-permissions; only
# with KPERM=1), ckpt-user (ckpt-mount mounted by BENCH_USER through
# fusermount3: no kernel passthrough, every read and write served by the daemon; the workload
# runs as that user too). Workloads marked "user" in --list run as BENCH_USER on every variant:
# the peers are then mounted by that user as well (passthrough_hp with --nopassthrough, which a
# user's server cannot have), and ckpt is root's mount with --allow-other.
#
# Needs root (drop_caches, FUSE), bindfs, git, python3, node (for the tsc build), tar, runuser,
# setpriv, /usr/bin/time; for passthrough_hp the first time, apt access to Debian's archive (see
# bench/peers.sh); for the agent workloads' fixtures the first time, the npm registry, crates.io
# and PyPI; ripgrep (`rg`) is timed next to `grep -r` when it is installed.
set -u -o pipefail
# The whole script is one compound command: bash parses it completely before running it, so
# editing this file during a (long) run does not change the run.
{

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$REPO/bench"

QUICK=0 REPS="" LONG_REPS="" ONLY="" OUT="" BUILD=1 LIST=0 HEAD_BUILD=0 BUILD_REV=HEAD RESUME=0
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --reps) REPS="$2"; shift ;;
    --long-reps) LONG_REPS="$2"; shift ;;
    --only) ONLY="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --no-build) BUILD=0 ;;
    --resume) RESUME=1 ;;
    --head) HEAD_BUILD=1 BUILD_REV=HEAD ;;
    --rev) HEAD_BUILD=1 BUILD_REV="$2"; shift ;;
    --list) LIST=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" = 1 ]; then REPS="${REPS:-1}"; LONG_REPS="${LONG_REPS:-1}"; fi
REPS="${REPS:-5}"
LONG_REPS="${LONG_REPS:-3}"

FIX="${FIX:-/tmp/ckpt-bench-fixtures}"
if [ -z "${FIXTURES_SH:-}" ]; then
  if [ -f "$REPO/../shared/bench/fixtures.sh" ]; then FIXTURES_SH="$REPO/../shared/bench/fixtures.sh"
  else FIXTURES_SH=/work/shared/bench/fixtures.sh; fi
fi
WORK="${WORK:-/tmp/ckpt-bench-work}"
BINDFS="${BINDFS:-bindfs}"
BINDFS_TUNED_OPTS="multithreaded,big_writes,kernel_cache,entry_timeout=60,attr_timeout=60"
CLK_TCK="$(getconf CLK_TCK)"

# (the global git configuration holds only safe.directory=*: the user's clone reads root's
# fixture repository, and root checks the user's clone afterwards)
export GIT_CONFIG_GLOBAL="$WORK/gitconfig" GIT_CONFIG_NOSYSTEM=1
BENCH_USER="${BENCH_USER:-ckpt-ci}"
PY="${PYTHON:-/usr/bin/python3}"
[ -x "$PY" ] || PY="$(command -v python3)"
# the helpers and the binaries are run from copies in $WORK/bin (made at the start)
SF="$WORK/bin/smallfiles.py" TIMED="$WORK/bin/timed.sh"
USER_PATH="/usr/local/bin:/usr/bin:/bin"
# RUNAS: the user the current case's workload runs as (empty: root)
RUNAS=""
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
export LC_ALL=C

# ---------------------------------------------------------------------------------------------
# Workloads. Each has a setup (untimed, on the plain folder $S before any mount), a run (in the
# mounted target $T; timed with `timeit`), and optionally an after (untimed, after unmount).
# WL_VARIANTS: which variants run it; WL_LONG=1: long (LONG_REPS, skipped by --quick unless
# WL_QUICK=1); WL_DROP=1: drop the page cache after mounting, just before the run.
# ---------------------------------------------------------------------------------------------
# WL_USER=1: the workload runs as BENCH_USER on every variant; WL_FIX: the parts of
# bench/fixtures-agent.sh it needs.
# ---------------------------------------------------------------------------------------------
ROOT_ALL="native bindfs bindfs-tuned passthrough-hp ckpt"
ALL="$ROOT_ALL ckpt-user"
declare -A WL_VARIANTS WL_LONG WL_DROP WL_QUICK WL_USER WL_FIX
WORKLOADS=()
wl() {
  WORKLOADS+=("$1"); WL_VARIANTS[$1]="$2"; WL_LONG[$1]="$3"; WL_DROP[$1]="$4"; WL_QUICK[$1]="$5"
  WL_USER[$1]="${6:-0}"; WL_FIX[$1]="${7:-}"
}
# (tar run by root restores owners, which tar run by a user does not: the untars as root have no
# ckpt-user variant, untar-user compares the two mounts on the same work)
#  name              variants                                  long drop quick user fixtures
wl untar-linux       "$ROOT_ALL"                               1    1    0
wl untar-sub         "$ROOT_ALL"                               0    1    1
wl walk              "$ALL"                                    0    1    1
wl git               "$ALL"                                    0    0    1
wl create-10k        "$ALL"                                    0    0    1
wl rm-rf             "$ALL"                                    0    0    1
wl sed-i             "$ALL"                                    0    0    1
wl cp-r              "$ALL"                                    0    0    1
wl dd                "$ALL"                                    1    0    0
wl tsc               "$ALL"                                    0    0    1
wl firstwrite        "$ALL"                                    0    0    1
wl turn-npm          "native ckpt ckpt-user git-stash shadow-git" 0 0   1
wl turn-linux        "native ckpt ckpt-user shadow-git"        1    0    1
wl rewind-10         "ckpt ckpt-user"                          0    0    1
wl rewind-1000       "ckpt ckpt-user"                          0    0    1
wl rewind-10000      "ckpt ckpt-user"                          0    0    1
wl rewind-rmrf       "ckpt ckpt-user"                          0    0    1
wl read-tree         "ckpt ckpt-user"                          0    0    1
# issue 16: what agents run, as root and as a user
wl npm-ci            "$ALL"                                    0    0    1    0    npm-cache
wl cargo             "$ALL"                                    0    0    1    0    "rust crate"
wl git-checkout      "$ALL"                                    0    0    1    0    gitrepo
wl pip               "$ALL"                                    0    0    1    0    wheels
wl grep              "$ALL"                                    0    1    1
wl untar-user        "$ALL"                                    0    1    1    1
wl create-user       "$ALL"                                    0    0    1    1
# the cost of one FUSE round trip, and the tails of first writes and unlinks beside an rm -rf
wl floor             "$ALL"                                    0    0    1
wl floor-ttl0        "native passthrough-hp ckpt ckpt-user"    0    0    1
wl tails             "$ALL"                                    0    0    1
# rewinds at scale: most files unchanged (a rewind skips a file whose bytes match), all changed
wl rewind-10000-same "ckpt ckpt-user"                          0    0    1
wl rewind-100k       "ckpt ckpt-user"                          1    0    0
wl rewind-100k-same  "ckpt ckpt-user"                          1    0    0
wl rewind-linux      "ckpt ckpt-user"                          1    0    0
# KPERM=1: the permission lever's "before" next to each root workload the peers run as well
# (a workload run as the user meets root's ckpt-mount through --allow-other, which keeps the
# kernel's checks anyway)
if [ "${KPERM:-0}" = 1 ]; then
  for w in "${WORKLOADS[@]}"; do
    case " ${WL_VARIANTS[$w]} " in *" passthrough-hp ckpt "*) ;; *) continue ;; esac
    [ "${WL_USER[$w]}" = 1 ] && continue
    WL_VARIANTS[$w]="${WL_VARIANTS[$w]/passthrough-hp ckpt/passthrough-hp ckpt ckpt-kperm}"
  done
fi

# BASE_BIN: the user's mount made by another binary, next to the user's mount made by this one
if [ -n "${BASE_BIN:-}" ]; then
  for w in "${WORKLOADS[@]}"; do
    case " ${WL_VARIANTS[$w]} " in *" ckpt-user "*) ;; *) continue ;; esac
    WL_VARIANTS[$w]="${WL_VARIANTS[$w]/ckpt-user/ckpt-user ckpt-user-base}"
  done
fi

if [ "$LIST" = 1 ]; then
  for w in "${WORKLOADS[@]}"; do printf '%-18s variants: %s%s%s\n' "$w" "${WL_VARIANTS[$w]}" \
    "$( [ "${WL_LONG[$w]}" = 1 ] && echo '  (long)')" "$( [ "${WL_USER[$w]}" = 1 ] && echo '  (runs as the user)')"; done
  exit 0
fi
for w in ${ONLY//,/ }; do
  [ -n "${WL_VARIANTS[$w]:-}" ] || { echo "run.sh: no workload $w (see --list)" >&2; exit 2; }
done

# ---------------------------------------------------------------------------------------------
# Plumbing
# ---------------------------------------------------------------------------------------------
log() { printf '%s\n' "$*"; printf '%s\n' "$*" >> "$LOG"; }
die() { echo "run.sh: $*" >&2; exit 1; }
# measurements and problems of the run in progress go to $CASE_RAW / $CASE_PROBLEMS and are
# appended to $RAW / $PROBLEMS when the run is complete (so --resume never sees half a run)
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$CASE_RAW"; }
# problem LABEL MESSAGE: something failed or looked wrong; goes into the results file
problem() {
  printf '%s\t%s\t%s\t%s\n' "$1" "${V:--}" "${REP:--}" "$(printf '%s' "$2" | tr '\t\n' '  ')" >> "$CASE_PROBLEMS"
  log "  !! $1 on $V rep $REP: $2"
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12 + $13}'; }
vmhwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
sub_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
# CPU seconds (user + sys) of this shell's waited-for children so far (bash `times`, line 2)
# (`times` must run in this shell, not in a $(...) subshell: it writes to a file, read after)
children_cpu() {
  times > "$WORK/.times"
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] } printf "%.3f", n }' "$WORK/.times"
}

# as_user CMD...: CMD as BENCH_USER, with a PATH it can use (root's may lead into /root); the
# rest of the environment, exported functions included, goes along. From /, since root cannot
# even enter a FUSE mount of the user's made without allow_other.
as_user() { (cd / && runuser -u "$BENCH_USER" -- env PATH="$USER_PATH" "$@"); }
# as_user_daemon CMD...: the same for a FUSE server: runuser sets the soft RLIMIT_NOFILE to the
# PAM default (1024 here); the server gets the hard limit as soft limit, as root's has
# (CKPT_USER_NOFILE=session keeps runuser's)
as_user_daemon() {
  if [ "${CKPT_USER_NOFILE:-hard}" = session ]; then as_user "$@"
  else as_user bash -c 'ulimit -Sn "$(ulimit -Hn)" && exec "$@"' as_user_daemon "$@"; fi
}
# in_target DIR CMD...: CMD in DIR as whoever runs this case's workload ($RUNAS or root)
in_target() {
  local dir="$1"; shift
  if [ -n "$RUNAS" ]; then as_user bash -c 'cd "$1" && shift && "$@"' in_target "$dir" "$@"
  else ( cd "$dir" && "$@" ); fi
}

# timeit LABEL CMD...: runs CMD in $T (or in $AT if set), records wall seconds; on FUSE
# variants also the daemon's CPU seconds during CMD and its peak RSS so far. When the case runs
# as the user, CMD is timed inside the user's process (bench/timed.sh), runuser's start aside.
timeit() {
  local label="$1"; shift
  local dir="${AT:-$T}" c0="" c1 t0 t1 rc dt w0 w1 wcpu
  [ -n "$DPID" ] && c0="$(cpu_ticks "$DPID")"
  if [ -n "$RUNAS" ]; then
    rm -f "$RUN/.timed"
    as_user bash "$TIMED" "$RUN/.timed" "$dir" "$@" >> "$LOG" 2>&1
    rc=$?
    dt="$(awk '$1 == "sec" {print $2}' "$RUN/.timed" 2>/dev/null)"
    wcpu="$(awk '$1 == "wcpu" {print $2}' "$RUN/.timed" 2>/dev/null)"
    if [ -z "$dt" ]; then problem "$label" "no timing from bench/timed.sh (exit status $rc)"; dt=0; rc=$(( rc ? rc : 1 )); fi
  else
    children_cpu > "$WORK/.w0"; w0="$(cat "$WORK/.w0")"
    t0="$EPOCHREALTIME"
    ( cd "$dir" && "$@" ) >> "$LOG" 2>&1
    rc=$?
    t1="$EPOCHREALTIME"
    children_cpu > "$WORK/.w1"; w1="$(cat "$WORK/.w1")"
    dt="$(sub_s "$t0" "$t1")"
    wcpu="$(sub_s "$w0" "$w1")"
  fi
  record "$label" "$V" "$REP" wcpu "$wcpu"
  if [ -n "$DPID" ]; then
    c1="$(cpu_ticks "$DPID")"
    if [ -n "$c0" ] && [ -n "$c1" ]; then
      record "$label" "$V" "$REP" cpu "$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')"
      record "$label" "$V" "$REP" rss_kb "$(vmhwm_kb "$DPID")"
    else
      problem "$label" "the daemon (pid $DPID) is gone after the run"
    fi
  fi
  record "$label" "$V" "$REP" sec "$dt"
  [ "$rc" -ne 0 ] && problem "$label" "exit status $rc: \`$*\` (see $LOG)" && record "$label" "$V" "$REP" error "$rc"
  printf '  %-22s %-14s rep %-2s %10.3f s%s\n' "$label" "$V" "$REP" "$dt" "$( [ "$rc" -ne 0 ] && echo "  FAILED rc=$rc")"
  return "$rc"
}
# inside LABEL CMD...: an untimed step in the target, as the case's user (a failure is reported)
inside() {
  local label="$1"; shift
  in_target "${AT:-$T}" "$@" >> "$LOG" 2>&1 || { problem "$label" "untimed step failed: \`$*\`"; return 1; }
}

MOUNTED=""  # what to clean up on exit
# is_mounted DIR: from the mount table (not `mountpoint`, which stats DIR: root cannot, in a
# FUSE mount of the user's without allow_other)
is_mounted() { findmnt -rn --mountpoint "$1" > /dev/null; }
# fuse_mount OUTPUT CMD...: start the FUSE server CMD (in the foreground, so $DPID is the server)
# as `CMD $S $RUN/mnt`, its output appended to OUTPUT, and wait until it is mounted
# (in a case run as the user, the server is the user's too: setpriv execs it, so $! is the server)
fuse_mount() {
  local out="$1" mnt="$RUN/mnt"; shift
  mkdir -p "$mnt"
  [ -n "$RUNAS" ] && { chown "$RUNAS:" "$mnt"; set -- setpriv --reuid="$RUNAS" --regid="$RUNAS" --init-groups \
    env PATH="$USER_PATH" "$@"; }
  "$@" "$S" "$mnt" >> "$out" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do is_mounted "$mnt" && break; sleep 0.05; done
  if ! is_mounted "$mnt"; then
    problem mount "$V did not mount: \`$*\`$([ "$out" != "$LOG" ] && printf ': %s' "$(head -c 300 "$out")")"
    kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; DPID=""
    return 1
  fi
  MOUNTED="fuse:$mnt" T="$mnt"
}
mount_variant() {
  DPID="" T="$S" MOUNTED=""
  # floor-ttl0: no attribute caching, so every fstat is a GETATTR
  local ckpt_opts=() pthp_opts=()
  [ "$W" = floor-ttl0 ] && ckpt_opts=(--ttl 0) pthp_opts=(--nocache)
  [ "$V" = ckpt-kperm ] && ckpt_opts+=(--kernel-permissions)
  # a user's passthrough_hp cannot have kernel passthrough (CAP_SYS_ADMIN); root's ckpt-mount
  # serves a workload run as the user through allow_other
  [ -n "$RUNAS" ] && pthp_opts+=(--nopassthrough)
  [ -n "$RUNAS" ] && [ "$V" = ckpt ] && ckpt_opts+=(--allow-other)
  case "$V" in
    native|git-stash|shadow-git) return 0 ;;
    bindfs) fuse_mount "$LOG" "$BINDFS" --no-allow-other -f ;;
    bindfs-tuned) fuse_mount "$LOG" "$BINDFS" --no-allow-other -f -o "$BINDFS_TUNED_OPTS" ;;
    passthrough-hp)
      # its output is read after the unmount (it prints nothing on a clean run)
      : > "$PTHP_OUT"
      # shellcheck disable=SC2086 # PTHP_OPTS is a list of options
      fuse_mount "$PTHP_OUT" "$PTHP_BIN" --foreground "${pthp_opts[@]}" ${PTHP_OPTS:-}
      ;;
    ckpt|ckpt-kperm|ckpt-user|ckpt-user-base)
      local runner=() opts="${ckpt_opts[*]} ${CKPT_MOUNT_OPTS:-}" bin="$CKPT_BIN"
      case "$V" in ckpt-user*) runner=(as_user_daemon) ;; esac
      [ "$V" = ckpt-user-base ] && bin="$CKPT_BASE_BIN"
      # the variant's own CLI for the steps that call it (rewind_cli)
      CKPT_VBIN="$bin"
      # shellcheck disable=SC2086 # CKPT_MOUNT_OPTS is a list of options
      "${runner[@]}" "$bin" mount "${ckpt_opts[@]}" ${CKPT_MOUNT_OPTS:-} "$S" >> "$LOG" 2>&1 ||
        { problem mount "ckpt-mount mount ${opts# } $S failed$([ -n "${runner[*]}" ] && echo " (as $BENCH_USER)")"; return 1; }
      MOUNTED="$V:$S"
      DPID="$("$bin" status --dir "$S" --json 2>>"$LOG" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>>"$LOG")"
      [ -n "$DPID" ] || problem mount "no daemon pid from ckpt-mount status --json"
      in_target "$S" sh -c 'echo 2 > .ckpt/turn' >> "$LOG" 2>&1 || problem mount "echo 2 > .ckpt/turn failed"
      ;;
  esac
}
unmount_variant() {
  case "$MOUNTED" in
    fuse:*)
      local mnt="${MOUNTED#fuse:}"
      for _ in $(seq 50); do is_mounted "$mnt" || break; fusermount -u "$mnt" >> "$LOG" 2>&1 && break; sleep 0.2; done
      if is_mounted "$mnt"; then problem unmount "$V busy; lazy unmount"; fusermount -uz "$mnt"; fi
      wait "$DPID" 2>/dev/null
      # whatever passthrough_hp printed (e.g. `ERROR: Reached maximum number of file
      # descriptors.` once per lookup or create refused with EMFILE, one fd per inode)
      if [ "$V" = passthrough-hp ] && [ -s "$PTHP_OUT" ]; then
        problem "$W" "passthrough_hp printed $(wc -l < "$PTHP_OUT") lines: $(cut -c1-90 "$PTHP_OUT" |
          sed -E 's/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -3 |
          awk '{n=$1; $1=""; printf "%s× `%s`; ", n, substr($0,2)}')"
        { echo "-- passthrough_hp output, $W rep $REP:"; cat "$PTHP_OUT"; } >> "$LOG"
      fi
      ;;
    ckpt:*|ckpt-kperm:*|ckpt-user:*|ckpt-user-base:*)
      local dir="${MOUNTED#*:}" ok=0 runner=() bin="$CKPT_BIN"
      case "${MOUNTED%%:*}" in ckpt-user*) runner=(as_user) ;; esac
      [ "${MOUNTED%%:*}" = ckpt-user-base ] && bin="$CKPT_BASE_BIN"
      for _ in $(seq 50); do
        is_mounted "$dir" || { ok=1; break; }
        "${runner[@]}" "$bin" unmount "$dir" >> "$LOG" 2>&1 && { ok=1; break; }
        sleep 0.2
      done
      if [ "$ok" = 0 ]; then
        problem unmount "ckpt-mount unmount $dir kept failing; lazy unmount"
        fusermount -uz "$dir" >> "$LOG" 2>&1 || umount -l "$dir" >> "$LOG" 2>&1
      fi
      if [ -n "$DPID" ]; then
        for _ in $(seq 300); do [ -d "/proc/$DPID" ] || break; sleep 0.1; done
        [ -d "/proc/$DPID" ] && problem unmount "daemon pid $DPID still alive 30 s after unmount"
      fi
      # warnings, errors and panics in the daemon's log (fuser's routine umount warning aside)
      local bad
      bad="$(grep -E ' (WARN|ERROR) |panicked' "$dir/.ckpt/daemon.log" 2>/dev/null | grep -v 'Failed to umount filesystem')"
      if [ -n "$bad" ]; then
        problem "$W" "daemon.log has $(echo "$bad" | wc -l) warning/error lines: $(echo "$bad" |
          sed -E 's/^\[[^ ]+ //; s/[0-9]+/N/g' | cut -c1-90 | sort | uniq -c | sort -rn | head -3 |
          awk '{n=$1; $1=""; printf "%s× `%s`; ", n, substr($0,2)}')"
        cp "$dir/.ckpt/daemon.log" "$WORK/logs/daemon-$W-$REP.log" 2>/dev/null
      fi
      ;;
  esac
  MOUNTED=""
}
cleanup() {
  [ -n "${MOUNTED:-}" ] && unmount_variant
  if [ -n "${FSDIR:-}" ] && mountpoint -q "$FSDIR"; then umount "$FSDIR" && rm -f "$WORK/fs.img"; fi
}
trap cleanup EXIT
# an interrupted run keeps its completed measurements (see --resume) and how long it ran
trap 'echo "interrupted" >&2; [ -n "${T0:-}" ] && echo "elapsed_part=$(sub_s "$T0" "$EPOCHREALTIME")" >> "$META"; exit 130' INT TERM

# store LABEL RAW_BYTES: after unmount, the ckpt-mount store next to what was captured
store_stats() {
  local label="$1" raw="$2" st="$S/.ckpt"
  [ -d "$st/blobs" ] || { problem "$label" "no .ckpt/blobs after unmount"; return; }
  record "$label" "$V" "$REP" raw_bytes "$raw"
  record "$label" "$V" "$REP" blob_bytes "$(find "$st/blobs" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}')"
  record "$label" "$V" "$REP" blob_du "$(du -sb "$st/blobs" | cut -f1)"
  record "$label" "$V" "$REP" blobs "$(find "$st/blobs" -type f | wc -l)"
  record "$label" "$V" "$REP" journal_bytes "$(stat -c %s "$st/journal.jsonl" 2>/dev/null || echo 0)"
}

cached() { # cached KEY CMD...: compute once per fixture set
  local f="$WORK/cache/$1"; shift
  [ -s "$f" ] || "$@" > "$f"
  cat "$f"
}
sub_entries() { cached sub-entries sh -c "tar tf '$FIX/linux-sub.tar' | wc -l"; }
full_entries() { cached full-entries sh -c "tar tf '$FIX/linux.tar' | wc -l"; }
sub_raw() { cached sub-raw sh -c "tar tvf '$FIX/linux-sub.tar' | awk '\$1 ~ /^-/ {s+=\$3} END{print s+0}'"; }
npm_files() { cached npm-files sh -c "find '$FIX/npmtree' -type f | wc -l"; }
sed_raw() { cached sed-raw sh -c "cd '$FIX/npmtree' && xargs -d '\n' -a '$FIX/sedlist.txt' stat -c %s | awk '{s+=\$1} END{print s+0}'"; }
count_entries() { find "$1" | wc -l; }

# ---------------------------------------------------------------------------------------------
# The workloads
# ---------------------------------------------------------------------------------------------
KSRC=linux-source-6.1
LINUX_EDITS=("$KSRC/kernel/fork.c" "$KSRC/mm/mmap.c" "$KSRC/init/main.c" "$KSRC/fs/open.c")
LINUX_TREE=linux; [ "$QUICK" = 1 ] && LINUX_TREE=linux-sub
NPM_EDITS=(src/module1.ts src/module2.ts src/module3.ts src/module4.ts)
edit4() { local m="$1" f; shift; for f in "$@"; do printf '// turn %s edit\n' "$m" >> "$f" || return 1; done; }
untar_sub_into() { tar -C "$1" -xf "$FIX/linux-sub.tar"; }
npm_into() { cp -a "$FIX/npmtree/." "$1/"; }

# untar of the whole Linux tree (78,579 files, 1.36 GB), page cache dropped first
w_untar-linux_setup() { :; }
w_untar-linux_run() { timeit untar-linux tar -xf "$FIX/linux.tar"; }
w_untar-linux_after() {
  local n; n="$(count_entries "$S/$KSRC")"
  [ "$n" = "$(full_entries)" ] || problem untar-linux "$n entries on disk, the tar has $(full_entries)"
}

# untar of the subset (16,111 entries, 207 MB), page cache dropped first
w_untar-sub_setup() { :; }
w_untar-sub_run() { timeit untar-sub tar -xf "$FIX/linux-sub.tar"; }
w_untar-sub_after() {
  local n; n="$(count_entries "$S/$KSRC")"
  [ "$n" = "$(sub_entries)" ] || problem untar-sub "$n entries on disk, the tar has $(sub_entries)"
  if [ "$V" = ckpt ]; then
    local d; d="$(tar -C "$S" -df "$FIX/linux-sub.tar" 2>&1 | head -5)"
    [ -z "$d" ] || problem untar-sub "tar -d differs on the underlying folder: $d"
  fi
}

# stat of every entry of the untarred subset: cold (caches dropped, fresh mount) then warm
w_walk_setup() { untar_sub_into "$S"; }
walk() { find . -printf '%s %m\n' > /dev/null; }
w_walk_run() { timeit walk-cold walk; timeit walk-warm walk; }

# git init && git add -A of the npm tree (7.4k files, 123 MB), then git status twice: the first
# one after the add asks for every file's attributes again (FUSE drops a file's cached atime on
# each read), the second is what an agent's repeated `git status` costs
w_git_setup() { npm_into "$S"; }
w_git_run() {
  timeit git-add sh -c 'git init -q && git add -A'
  timeit git-status sh -c 'git status --porcelain > /dev/null'
  timeit git-status-again sh -c 'git status --porcelain > /dev/null'
}

# 10,000 new files of 100 bytes from one python3 process
w_create-10k_setup() { :; }
w_create-10k_run() { timeit create-10k "$PY" "$SF" create small 10000; }
w_create-10k_after() {
  local n; n="$(find "$S/small" -type f | wc -l)"
  [ "$n" = 10000 ] || problem create-10k "$n files on disk, expected 10000"
}

# rm -rf of the untarred subset: on ckpt-mount every file's pre-image is captured
w_rm-rf_setup() { untar_sub_into "$S"; }
w_rm-rf_run() { timeit rm-rf rm -rf "$KSRC"; }
w_rm-rf_after() {
  [ -e "$S/$KSRC" ] && problem rm-rf "$KSRC still exists after rm -rf"
  [ "$V" = ckpt ] && store_stats rm-rf "$(sub_raw)"
}

# sed -i over 1,000 .js files of a copy of the npm tree (each file replaced by sed's rename)
w_sed-i_setup() { npm_into "$S"; }
sed1000() { xargs -d '\n' -a "$FIX/sedlist.txt" sed -i '1i // bench edit'; }
w_sed-i_run() { timeit sed-i sed1000; }
w_sed-i_after() {
  local n; n="$(cd "$S" && xargs -d '\n' -a "$FIX/sedlist.txt" head -qn1 | grep -c '^// bench edit$')"
  [ "$n" = 1000 ] || problem sed-i "$n of 1000 files edited on disk"
  [ "$V" = ckpt ] && store_stats sed-i "$(sed_raw)"
}

# cp -r of the npm tree into the target
w_cp-r_setup() { :; }
w_cp-r_run() { timeit cp-r cp -r "$FIX/npmtree" ./npmtree; }
w_cp-r_after() {
  local n; n="$(find "$S/npmtree" -type f | wc -l)"
  [ "$n" = "$(npm_files)" ] || problem cp-r "$n files on disk, expected $(npm_files)"
}

# 1 GiB sequential write (buffered, then with fdatasync) and read (warm, then cold)
w_dd_setup() { :; }
w_dd_run() {
  timeit dd-write dd if=/dev/zero of=f1 bs=1M count=1024 status=none
  sync
  timeit dd-write-fdatasync dd if=/dev/zero of=f2 bs=1M count=1024 conv=fdatasync status=none
  inside dd-warmup dd if=f1 of=/dev/null bs=1M status=none
  timeit dd-read-warm dd if=f1 of=/dev/null bs=1M status=none
  drop_caches
  timeit dd-read-cold dd if=f1 of=/dev/null bs=1M status=none
}
w_dd_after() {
  local a b; a="$(stat -c %s "$S/f1")"; b="$(stat -c %s "$S/f2")"
  [ "$a" = 1073741824 ] && [ "$b" = 1073741824 ] || problem dd "sizes on disk $a and $b, expected 1073741824"
}

# a real build: tsc type-checks and emits src/ (20 modules + a React component; 96 files read,
# lib.dom and @types/react from node_modules). First run in a fresh mount, then again.
w_tsc_setup() {
  npm_into "$S"
  cat > "$S/tsconfig.bench.json" <<'EOF'
{
  "compilerOptions": {
    "target": "es2022", "module": "esnext", "moduleResolution": "bundler",
    "jsx": "react-jsx", "strict": true, "outDir": "build", "skipLibCheck": true,
    "lib": ["es2022", "dom"]
  },
  "include": ["src/**/*.ts", "src/**/*.tsx"]
}
EOF
  cat > "$S/src/app.tsx" <<'EOF'
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { f1 } from "./module1";
export function App() {
  const [n, setN] = useState(0);
  return <button onClick={() => setN(f1(n))}>{n}</button>;
}
createRoot(document.getElementById("root")!).render(<App />);
EOF
}
tsc_build() { node node_modules/typescript/bin/tsc -p tsconfig.bench.json; }
w_tsc_run() { timeit tsc-first tsc_build; timeit tsc-again tsc_build; }
w_tsc_after() { [ -f "$S/build/app.js" ] || problem tsc "no build/app.js"; }

# first-write latency: open(f, 'r+b').write once on each of 10,000 pre-existing 100-byte files
# in a fresh turn (on ckpt-mount: one capture per file), then the same loop again (no capture)
w_firstwrite_setup() { "$PY" "$SF" create "$S/small" 10000; }
w_firstwrite_run() {
  local k v
  timeit firstwrite "$PY" "$SF" touch small "$RUN/fw1.txt"
  timeit secondwrite "$PY" "$SF" touch small "$RUN/fw2.txt"
  while read -r k v; do record firstwrite "$V" "$REP" "$k" "$v"; done < "$RUN/fw1.txt"
  while read -r k v; do record secondwrite "$V" "$REP" "$k" "$v"; done < "$RUN/fw2.txt"
}
w_firstwrite_after() { [ "$V" = ckpt ] && store_stats firstwrite 1000000; }

# a turn that edits 4 files: ckpt-mount `echo N > .ckpt/turn` + 4 edits, vs the 4 edits alone
# (native), vs a git checkpoint at the start of the turn (git add -A && git stash create, or a
# shadow repository: git --git-dir=SHADOW --work-tree=DIR add -A -f && commit) + 4 edits.
# The shadow repository adds with -f: like ckpt-mount it must cover ignored files too (and
# Debian's kernel tree has a top-level .gitignore of `/*`, which would leave it empty).
turn_setup() { # TREE: npm | linux
  case "$1" in
    npm) npm_into "$S" ;;
    linux-sub) untar_sub_into "$S" ;;
    linux) tar -C "$S" -xf "$FIX/linux.tar" ;;
  esac
  local t0 t1
  case "$V" in
    git-stash)
      (cd "$S" && git init -q && git add -A && git commit -qm base) >> "$LOG" 2>&1 || problem "turn-$1" "git base commit failed"
      ;;
    shadow-git)
      t0="$EPOCHREALTIME"
      (cd "$S" && git --git-dir="$RUN/shadow" init -q && git --git-dir="$RUN/shadow" --work-tree=. add -A -f &&
        git --git-dir="$RUN/shadow" --work-tree=. commit -qm "turn 1") >> "$LOG" 2>&1 || problem "turn-$1" "shadow initial commit failed"
      t1="$EPOCHREALTIME"
      record "shadow-initial-$1" "$V" "$REP" sec "$(sub_s "$t0" "$t1")"
      ;;
  esac
}
turn_run() { # TREE FILES...
  local tree="$1"; shift
  # the previous turn's work (untimed), so the checkpoint has something to record
  case "$V" in git-stash|shadow-git|ckpt|ckpt-user|ckpt-user-base) inside prev-turn edit4 2 "$@" ;; esac
  case "$V" in
    native) timeit "turn-$tree" sh -c ': && for f; do printf "// turn 3 edit\n" >> "$f" || exit 1; done' sh "$@" ;;
    ckpt|ckpt-user|ckpt-user-base)
      timeit "turn-$tree" sh -c 'echo 3 > .ckpt/turn && for f; do printf "// turn 3 edit\n" >> "$f" || exit 1; done' sh "$@"
      timeit "turnswitch-$tree" sh -c 'echo 4 > .ckpt/turn'
      ;;
    git-stash)
      timeit "turn-$tree" sh -c 'git add -A && git stash create > /dev/null && for f; do printf "// turn 3 edit\n" >> "$f" || exit 1; done' sh "$@"
      ;;
    shadow-git)
      timeit "turn-$tree" sh -c 'g="$1"; shift; git --git-dir="$g" --work-tree=. add -A -f && git --git-dir="$g" --work-tree=. commit -qm "turn 3" && for f; do printf "// turn 3 edit\n" >> "$f" || exit 1; done' sh "$RUN/shadow" "$@"
      ;;
  esac
}
w_turn-npm_setup() { turn_setup npm; }
w_turn-npm_run() { turn_run npm "${NPM_EDITS[@]}"; }
# (the full tree; the subset with --quick, recorded as turn-linux-sub)
w_turn-linux_setup() { turn_setup "$LINUX_TREE"; }
w_turn-linux_run() { turn_run "$LINUX_TREE" "${LINUX_EDITS[@]}"; }

# A rewind, timed: `ckpt-mount rewind 2 --dir DIR` run by the mount's owner, with the peak RSS
# of the CLI (/usr/bin/time) and of the daemon during the rewind alone (its VmHWM is reset just
# before, through /proc/PID/clear_refs, so the capture of the turn before does not count; what
# it held then, its VmRSS, is recorded as rss_before_kb)
rewind_cli() { /usr/bin/time -f '%M' -o "$RUN/cli-rss.txt" "${CKPT_VBIN:-$CKPT_BIN}" rewind 2 --dir "$S"; }
rewind_timed() { # LABEL
  if [ -n "$DPID" ]; then
    record "$1" "$V" "$REP" rss_before_kb "$(awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status" 2>/dev/null)"
    echo 5 > "/proc/$DPID/clear_refs" || problem "$1" "cannot reset the daemon's VmHWM"
  fi
  rm -f "$RUN/cli-rss.txt"
  AT=/ timeit "$1" rewind_cli
  record "$1" "$V" "$REP" cli_rss_kb "$(tail -n 1 "$RUN/cli-rss.txt" 2>/dev/null)"
}
# tar -d of a fixture against the target, as the case's user; prints the differences
# (a rewind gives rewritten paths the rewind's time as mtime, by design: mtime is not compared;
# the files of a user's case belong to that user, not to the owners in the tar)
tar_diff() { # TAR
  local skip=': Mod time differs$'
  [ -n "$RUNAS" ] && skip=': (Mod time|Uid|Gid|Mode) differs$'
  in_target "$T" tar -df "$1" 2>&1 | grep -Ev "$skip" | head -5
}

# rewind of N modified files (10k files of 100 bytes, the first N written once in turn 2):
# wall time of `ckpt-mount rewind 2 --dir DIR`, then every file is checked through the mount
rewind_setup() { "$PY" "$SF" create "$S/small" 10000; }
rewind_run() {
  local n="$1"
  inside "rewind-$n" "$PY" "$SF" touch small "$RUN/touch.txt" "$n"
  rewind_timed "rewind-$n"
  inside "rewind-$n" "$PY" "$SF" verify small 10000 || problem "rewind-$n" "files differ after the rewind (through the mount)"
  record "rewind-$n" "$V" "$REP" files "$n"
  record "rewind-$n" "$V" "$REP" changed "$n"
}
w_rewind-10_setup() { rewind_setup; };     w_rewind-10_run() { rewind_run 10; }
w_rewind-1000_setup() { rewind_setup; };   w_rewind-1000_run() { rewind_run 1000; }
w_rewind-10000_setup() { rewind_setup; };  w_rewind-10000_run() { rewind_run 10000; }
# rewind of an rm -rf of the subset: 16,111 entries to recreate from the store
w_rewind-rmrf_setup() { untar_sub_into "$S"; }
w_rewind-rmrf_run() {
  inside rewind-rmrf rm -rf "$KSRC"
  rewind_timed rewind-rmrf
  record rewind-rmrf "$V" "$REP" files "$(sub_entries)"
  local d; d="$(tar_diff "$FIX/linux-sub.tar")"
  [ -z "$d" ] || problem rewind-rmrf "tar -d differs through the mount after the rewind: $(echo "$d" | tr '\n' ' ')"
}
# issue 32: reading the folder as it was (`.ckpt/turns/1/`, every file's bytes) beside reading
# the folder itself, each from a cold page cache, on the npm tree after a turn changed the
# files of NPM_EDITS (so the tree reads those from the store and the rest from the folder)
w_read-tree_setup() { npm_into "$S"; }
read_all() { find "$1" -path ./.ckpt -prune -o -type f -exec cat {} + > /dev/null; }
w_read-tree_run() {
  inside read-tree sh -c 'echo 2 > .ckpt/turn && for f; do printf "// turn 2 edit\n" >> "$f" || exit 1; done' sh "${NPM_EDITS[@]}"
  drop_caches
  timeit read-folder read_all .
  drop_caches
  timeit read-tree-1 read_all .ckpt/turns/1
  local a b
  a="$(in_target "$T" sh -c 'find . -path ./.ckpt -prune -o -type f -print | wc -l')"
  b="$(in_target "$T" sh -c 'find .ckpt/turns/1 -type f | wc -l')"
  [ "$a" = "$b" ] || problem read-tree "the tree at turn 1 has $b files, the folder $a"
}
export -f read_all
# rewinds at scale, the agent workloads, the round-trip floor, the latency tails
# shellcheck source=bench/workloads-agent.sh
source "$BENCH/workloads-agent.sh"

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, FUSE mounts)"
[ -e /dev/fuse ] || die "/dev/fuse missing"
command -v "$BINDFS" > /dev/null || die "bindfs not found"
for c in git python3 node tar runuser setpriv /usr/bin/time; do command -v "$c" > /dev/null || die "$c not found"; done

mkdir -p "$WORK/bin" "$WORK/cache" "$WORK/logs" "$BENCH/results"
printf '[safe]\n\tdirectory = *\n' > "$WORK/gitconfig"
cp "$BENCH/smallfiles.py" "$BENCH/timed.sh" "$WORK/bin/" && chmod a+rx "$WORK/bin" "$SF" "$TIMED" || die "cannot copy the helpers to $WORK/bin"
exec 9> "$WORK/lock"
flock -n 9 || die "another bench/run.sh is using $WORK (set WORK=... to run a second one)"
LOG="$WORK/logs/run.log" RAW="$WORK/raw.tsv" PROBLEMS="$WORK/problems.tsv" META="$WORK/meta.txt"
CASE_RAW="$WORK/case-raw.tsv" CASE_PROBLEMS="$WORK/case-problems.tsv"
: > "$CASE_RAW"; : > "$CASE_PROBLEMS"
if [ "$RESUME" = 1 ] && [ -s "$META" ]; then
  echo "== resumed $(date -u '+%Y-%m-%d %H:%M UTC')" >> "$LOG"
  sed -i '/^load_end=/d; s/^elapsed_s=/elapsed_part=/' "$META"
  echo "resumed=$(date -u '+%H:%M UTC') (load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$META"
  touch "$RAW" "$PROBLEMS"
else
  RESUME=0
  : > "$LOG"; : > "$RAW"; : > "$PROBLEMS"; : > "$META"
fi
T0="$EPOCHREALTIME"

log "== fixtures ($FIXTURES_SH, FIX=$FIX)"
FIX="$FIX" bash "$FIXTURES_SH" >> "$LOG" 2>&1 || die "fixtures script failed (see $LOG)"
# the agent workloads' own fixtures, those the selected workloads need
agent_parts=""
for W in "${WORKLOADS[@]}"; do
  if [ -n "$ONLY" ]; then case ",$ONLY," in *",$W,"*) ;; *) continue ;; esac
  elif [ "$QUICK" = 1 ] && [ "${WL_QUICK[$W]}" = 0 ]; then continue; fi
  for p in ${WL_FIX[$W]}; do case " $agent_parts " in *" $p "*) ;; *) agent_parts="$agent_parts $p" ;; esac; done
done
if [ -n "$agent_parts" ]; then
  log "== agent fixtures (bench/fixtures-agent.sh$agent_parts)"
  # shellcheck disable=SC2086 # a list of parts
  FIX="$FIX" bash "$BENCH/fixtures-agent.sh" $agent_parts >> "$LOG" 2>&1 || die "bench/fixtures-agent.sh$agent_parts failed (see $LOG)"
fi
[ -f "$FIX/linux-sub.tar" ] && [ -d "$FIX/npmtree/node_modules" ] && [ -f "$FIX/sedlist.txt" ] || die "fixtures incomplete in $FIX"
# cached fixture facts (entry counts, byte sums) are recomputed when the fixtures change
fix_id() { { stat -c '%s %Y' "$FIX/linux-sub.tar" "$FIX/linux.tar" 2>/dev/null; md5sum < "$FIX/sedlist.txt"; } | tr '\n' ' '; }
[ "$(cat "$WORK/cache/fix-id" 2>/dev/null)" = "$(fix_id)" ] || { rm -f "$WORK/cache/"*; fix_id > "$WORK/cache/fix-id"; }

GITDESC="$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ] && echo ' + uncommitted changes in src/ or Cargo.*')"
if [ -n "${CKPT:-}" ]; then
  CKPT_SRC="$CKPT"
  GITDESC="binary given by CKPT (repo at $GITDESC)"
elif [ "$HEAD_BUILD" = 1 ]; then
  rev="$(cd "$REPO" && git rev-parse --verify "$BUILD_REV^{commit}")" || die "no commit $BUILD_REV"
  log "== cargo build --release of $BUILD_REV = ${rev:0:7} (git archive into $WORK/src-head)"
  rm -rf "$WORK/src-head" && mkdir -p "$WORK/src-head"
  # -m: the files get the time of extraction. With the commit's times (tar's default) cargo
  # saw sources older than the build of another commit in the same target dir and kept that
  # binary: a --rev run followed by a --head run measured the first binary twice.
  (cd "$REPO" && git archive "$rev") | tar -x -m -C "$WORK/src-head" || die "git archive failed"
  (cd "$WORK/src-head" && CARGO_TARGET_DIR="$WORK/target-head" cargo build --release) >> "$LOG" 2>&1 ||
    die "cargo build --release of $BUILD_REV (${rev:0:7}) failed (see $LOG)"
  CKPT_SRC="$WORK/target-head/release/ckpt-mount"
  GITDESC="${rev:0:7} (clean build of that commit: $(cd "$REPO" && git log -1 --format=%s "$rev" | cut -c1-60))"
else
  CKPT_SRC="$REPO/target/release/ckpt-mount"
  if [ "$BUILD" = 1 ]; then
    log "== cargo build --release"
    (cd "$REPO" && cargo build --release) >> "$LOG" 2>&1 || die "cargo build --release failed (see $LOG)"
  fi
fi
[ -x "$CKPT_SRC" ] || die "no ckpt-mount binary at $CKPT_SRC"
CKPT_BIN="$WORK/bin/ckpt-mount"
cp "$CKPT_SRC" "$CKPT_BIN.tmp" && mv "$CKPT_BIN.tmp" "$CKPT_BIN"
CKPT_BASE_BIN="$WORK/bin/ckpt-mount-base"
if [ -n "${BASE_BIN:-}" ]; then
  [ -x "$BASE_BIN" ] || die "BASE_BIN=$BASE_BIN is not an executable"
  cp "$BASE_BIN" "$CKPT_BASE_BIN.tmp" && mv "$CKPT_BASE_BIN.tmp" "$CKPT_BASE_BIN"
  log "== ckpt-user-base: $BASE_BIN ($("$CKPT_BASE_BIN" --version 2>&1))"
fi

# is the tuned bindfs accepted here?
VARIANTS_OK="native bindfs bindfs-tuned passthrough-hp ckpt ckpt-kperm ckpt-user ckpt-user-base git-stash shadow-git"
drop_variant() { local v=" $VARIANTS_OK "; v="${v/ "$1" / }"; v="${v# }"; VARIANTS_OK="${v% }"; }

# the steps a user runs call these functions of this script, and read these variables
export FIX BENCH PY SF RUN S KSRC CKPT_BIN CKPT_VBIN
export -f walk sed1000 tsc_build edit4 npm_ci cargo_build pip_env pip_venv pip_install grep_tree rg_tree rewind_cli

# can BENCH_USER mount ckpt-mount (through fusermount3), and does its daemon serve file I/O
# itself (a user's daemon has no CAP_SYS_ADMIN for kernel passthrough)?
CKPT_USER_DESC=""
if ! id "$BENCH_USER" > /dev/null 2>&1; then
  CKPT_USER_DESC="not run: no user $BENCH_USER"
else
  rm -rf "$WORK/probe" && mkdir -p "$WORK/probe/s" && chown "$BENCH_USER:" "$WORK/probe/s"
  if as_user_daemon "$CKPT_BIN" mount "$WORK/probe/s" >> "$LOG" 2>&1; then
    io="$("$CKPT_BIN" status --dir "$WORK/probe/s" 2>> "$LOG" | sed -n 's/^file I\/O: *//p')"
    CKPT_USER_DESC="mounted by $BENCH_USER (uid $(id -u "$BENCH_USER")) through $(command -v fusermount3 || echo fusermount3); \`ckpt-mount status\`: file I/O: $io; daemon's soft RLIMIT_NOFILE: $([ "${CKPT_USER_NOFILE:-hard}" = session ] && echo "runuser's ($(as_user bash -c 'ulimit -Sn'))" || echo "raised to the hard limit ($(as_user bash -c 'ulimit -Hn'))")"
    as_user "$CKPT_BIN" unmount "$WORK/probe/s" >> "$LOG" 2>&1 || fusermount -uz "$WORK/probe/s"
  else
    CKPT_USER_DESC="not run: $BENCH_USER could not mount ckpt-mount (see $LOG)"
  fi
  rm -rf "$WORK/probe"
fi
case "$CKPT_USER_DESC" in "not run"*) log "ckpt-user $CKPT_USER_DESC: no ckpt-user variant"; drop_variant ckpt-user; drop_variant ckpt-user-base ;; esac
rm -rf "$WORK/probe" && mkdir -p "$WORK/probe/s" "$WORK/probe/m"
if "$BINDFS" --no-allow-other -o "$BINDFS_TUNED_OPTS" "$WORK/probe/s" "$WORK/probe/m" >> "$LOG" 2>&1; then
  fusermount -u "$WORK/probe/m"
else
  log "bindfs does not accept -o $BINDFS_TUNED_OPTS: no bindfs-tuned variant"
  drop_variant bindfs-tuned
fi
rm -rf "$WORK/probe"

# libfuse's passthrough_hp: built from Debian's fuse3 source package by bench/peers.sh (cached in
# PEERS_DIR), copied to $WORK/bin like ckpt-mount, then mounted once: does it mount, and does the
# kernel accept its passthrough (it says `fuse_passthrough_open failed` and goes on without)?
PTHP_BIN="$WORK/bin/passthrough_hp" PTHP_OUT="$WORK/logs/passthrough-hp.out" PTHP_DESC=""
if [ "${PASSTHROUGH_HP:-}" = none ]; then
  PTHP_DESC="not run (PASSTHROUGH_HP=none)"
else
  pthp_src="${PASSTHROUGH_HP:-}"
  if [ -z "$pthp_src" ]; then
    log "== passthrough_hp (bench/peers.sh, PEERS_DIR=${PEERS_DIR:-/tmp/ckpt-bench-peers})"
    pthp_src="$(bash "$BENCH/peers.sh" passthrough-hp 2>> "$LOG")" || pthp_src=""
    [ -n "$pthp_src" ] || PTHP_DESC="not run: bench/peers.sh could not build it (see $LOG)"
  fi
  if [ -n "$pthp_src" ]; then
    rm -rf "$WORK/probe" && mkdir -p "$WORK/probe/s" "$WORK/probe/m"
    : > "$PTHP_OUT"
    if cp "$pthp_src" "$PTHP_BIN.tmp" && mv "$PTHP_BIN.tmp" "$PTHP_BIN"; then
      "$PTHP_BIN" --foreground "$WORK/probe/s" "$WORK/probe/m" >> "$PTHP_OUT" 2>&1 &
      pthp_pid=$!
      for _ in $(seq 100); do mountpoint -q "$WORK/probe/m" && break; sleep 0.05; done
      if mountpoint -q "$WORK/probe/m"; then
        if ! { echo probe > "$WORK/probe/m/f" && [ "$(cat "$WORK/probe/m/f")" = probe ]; }; then
          PTHP_DESC="failed to write and read back a file"
        fi
        fusermount -u "$WORK/probe/m" >> "$LOG" 2>&1 || fusermount -uz "$WORK/probe/m"
      else
        PTHP_DESC="did not mount"
        kill "$pthp_pid" 2>/dev/null
      fi
      wait "$pthp_pid" 2>/dev/null
    else
      PTHP_DESC="cannot copy $pthp_src to $PTHP_BIN"
    fi
    cat "$PTHP_OUT" >> "$LOG"
    if [ -n "$PTHP_DESC" ]; then
      PTHP_DESC="not run: $pthp_src $PTHP_DESC (see $LOG)"
    else
      PTHP_DESC="$(cat "$pthp_src.info" 2>/dev/null || echo "$pthp_src"), sha256 $(sha256sum "$PTHP_BIN" | cut -c1-16)"
      grep -q 'fuse_passthrough_open failed' "$PTHP_OUT" &&
        PTHP_DESC="$PTHP_DESC; NB: the kernel refused its passthrough in the probe, so it ran without"
    fi
    rm -rf "$WORK/probe"
  fi
fi
case "$PTHP_DESC" in
  "not run"*) log "passthrough_hp $PTHP_DESC: no passthrough-hp variant"; drop_variant passthrough-hp ;;
esac

BENCH_FS="${BENCH_FS:-loop}"
FS_DESC="host filesystem of $WORK ($(findmnt -n -o FSTYPE -T "$WORK"))"
if [ "$BENCH_FS" = loop ]; then
  FSDIR="$WORK/fs"
  mkdir -p "$FSDIR"
  mountpoint -q "$FSDIR" && { umount "$FSDIR" || die "cannot unmount the old $FSDIR"; }
  rm -f "$WORK/fs.img"
  truncate -s "${BENCH_FS_SIZE:-24G}" "$WORK/fs.img" || die "cannot make $WORK/fs.img"
  mkfs.ext4 -q -F "$WORK/fs.img" >> "$LOG" 2>&1 || die "mkfs.ext4 of $WORK/fs.img failed (see $LOG)"
  mount -o loop "$WORK/fs.img" "$FSDIR" || die "cannot loop-mount $WORK/fs.img"
  FS_DESC="fresh ext4 with a journal on a loop device (\`mkfs.ext4\` defaults, ${BENCH_FS_SIZE:-24G} sparse image on $(findmnt -n -o FSTYPE -T "$WORK"))"
  RUN="$FSDIR/run"
elif [ "$BENCH_FS" = host ]; then
  RUN="$WORK/run"
else
  die "BENCH_FS must be loop or host, not $BENCH_FS"
fi
S="" T="" V="" REP="" W="" DPID=""
[ "$RESUME" = 1 ] || {
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "mode=$([ "$QUICK" = 1 ] && echo quick || echo full)"
  echo "reps=$REPS"
  echo "long_reps=$LONG_REPS"
  echo "git=$GITDESC"
  echo "binary=$CKPT_SRC sha256 $(sha256sum "$CKPT_BIN" | cut -c1-16)"
  [ -n "${BASE_BIN:-}" ] && echo "base_binary=$BASE_BIN sha256 $(sha256sum "$CKPT_BASE_BIN" | cut -c1-16)"
  echo "kernel=$(uname -r)"
  echo "cpus=$(nproc)"
  echo "mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "bindfs=$("$BINDFS" --version 2>&1 | head -1), $("$BINDFS" --fuse-version 2>&1 | tail -1)"
  echo "bindfs_tuned=-o $BINDFS_TUNED_OPTS"
  echo "passthrough_hp=$PTHP_DESC"
  echo "ckpt_user=$CKPT_USER_DESC"
  echo "python=$PY ($("$PY" --version 2>&1))"
  [ -f "$FIX/rust/VERSION" ] && echo "rust=$(tr '\n' ' ' < "$FIX/rust/VERSION")"
  echo "rg=$(if command -v rg > /dev/null; then rg --version | head -1; else echo 'not installed: no rg steps'; fi)"
  echo "passthrough_hp_options=\`passthrough_hp --foreground ${PTHP_OPTS:+$PTHP_OPTS }SRC MNT\`$([ -z "${PTHP_OPTS:-}" ] && echo ' (defaults: kernel passthrough, 86400 s entry and attribute timeouts, the libfuse thread pool)')"
  echo "ckpt_options=\`ckpt-mount mount ${CKPT_MOUNT_OPTS:+$CKPT_MOUNT_OPTS }DIR\`$([ -z "${CKPT_MOUNT_OPTS:-}" ] && echo ' (defaults)')"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "fs=$FS_DESC"
} >> "$META"

for W in "${WORKLOADS[@]}"; do
  if [ -n "$ONLY" ]; then case ",$ONLY," in *",$W,"*) ;; *) continue ;; esac; fi
  if [ "$QUICK" = 1 ] && [ "${WL_QUICK[$W]}" = 0 ] && [ -z "$ONLY" ]; then continue; fi
  if [ "${WL_USER[$W]}" = 1 ] && ! id "$BENCH_USER" > /dev/null 2>&1; then
    log "== $W skipped: it runs as $BENCH_USER, and there is no such user"; continue
  fi
  reps="$REPS"; [ "${WL_LONG[$W]}" = 1 ] && reps="$LONG_REPS"
  log "== $W ($reps x: ${WL_VARIANTS[$W]})"
  for REP in $(seq "$reps"); do
    # the order rotates by one each repetition, so no variant always runs first or right after
    # the same other one (a 1 GiB fdatasync, for one, is faster or slower by half depending on
    # what the run before it left for the disk to flush)
    read -r -a order <<< "${WL_VARIANTS[$W]}"
    rot=$(( (REP - 1) % ${#order[@]} ))
    for V in "${order[@]:rot}" "${order[@]:0:rot}"; do
      case " $VARIANTS_OK " in *" $V "*) ;; *) continue ;; esac
      if [ "$RESUME" = 1 ] && grep -qP "^\Q$W\E\t\Q$V\E\t$REP\tdone\t" "$RAW"; then continue; fi
      : > "$CASE_RAW"; : > "$CASE_PROBLEMS"
      rm -rf "$RUN"; mkdir -p "$RUN/src"; S="$RUN/src"; T="$S"; DPID=""
      RUNAS=""; { [ "$V" = ckpt-user ] || [ "$V" = ckpt-user-base ] || [ "${WL_USER[$W]}" = 1 ]; } && RUNAS="$BENCH_USER"
      echo "-- $W $V rep $REP" >> "$LOG"
      "w_${W}_setup" >> "$LOG" 2>&1 || problem "$W" "setup failed"
      # a case run as the user gets everything it works on
      [ -n "$RUNAS" ] && { chown -R "$RUNAS:" "$RUN" || problem "$W" "chown -R $RUNAS $RUN failed"; }
      sync
      if mount_variant; then
        [ "${WL_DROP[$W]}" = 1 ] && drop_caches
        "w_${W}_run"
        unmount_variant
        if declare -F "w_${W}_after" > /dev/null; then "w_${W}_after"; fi
      fi
      rm -rf "$RUN"
      record "$W" "$V" "$REP" "done" 1
      cat "$CASE_RAW" >> "$RAW"; cat "$CASE_PROBLEMS" >> "$PROBLEMS"; : > "$CASE_RAW"; : > "$CASE_PROBLEMS"
    done
  done
done

T1="$EPOCHREALTIME"
{
  echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "elapsed_s=$(sub_s "$T0" "$T1")"
} >> "$META"

if [ -z "$OUT" ]; then
  OUT="$BENCH/results/$(date -u +%Y-%m-%d)$([ "$QUICK" = 1 ] && echo -quick).md"
fi
cp "$RAW" "${OUT%.md}.tsv"
python3 "$BENCH/stats.py" --raw "$RAW" --meta "$META" --problems "$PROBLEMS" > "$OUT" || die "stats.py failed"
echo
cat "$OUT"
echo
echo "results: $OUT (raw: ${OUT%.md}.tsv, log: $LOG)"
exit 0
}

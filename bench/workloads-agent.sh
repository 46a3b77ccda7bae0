# The workloads of issue 16, sourced by bench/run.sh (and by bench/requests.sh, for its cargo
# build; not run on its own): rewinds at scale, the
# agent workloads, the FUSE round-trip floor and the latency tails. Same conventions as the
# workloads in run.sh: w_NAME_setup (untimed, on the plain folder $S before mounting), w_NAME_run
# (in the mounted target $T, timed with `timeit`), w_NAME_after (untimed, after unmount); the
# list of workloads, their variants and flags is in run.sh (`wl`).
# shellcheck shell=bash disable=SC2154 # run.sh's variables

# Every file of DIR opened for writing in turn 2, but 99 in 100 given their own first byte back:
# the rewind has N captured files to consider, and since a rewind skips a file whose bytes
# already match (it hashes a same-size file first), it rewrites only N/100. Next to the
# all-changed case of the same size, this shows what the hashing costs and what the skip saves.
rewind_same_run() { # LABEL DIR N
  inside "$1" "$PY" "$SF" touch-same "$2" "$RUN/touch.txt" 100
  rewind_timed "$1"
  inside "$1" "$PY" "$SF" verify "$2" "$3" || problem "$1" "files differ after the rewind (through the mount)"
  record "$1" "$V" "$REP" files "$3"
  record "$1" "$V" "$REP" changed "$(( $3 / 100 ))"
}
w_rewind-10000-same_setup() { rewind_setup; }
w_rewind-10000-same_run() { rewind_same_run rewind-10000-same small 10000; }
# 100,000 files of 100 bytes in 100 directories: all changed, then 1 in 100 changed
w_rewind-100k_setup() { "$PY" "$SF" create-tree "$S/tree" 100000; }
w_rewind-100k_run() {
  inside rewind-100k "$PY" "$SF" touch tree "$RUN/touch.txt"
  rewind_timed rewind-100k
  inside rewind-100k "$PY" "$SF" verify tree 100000 || problem rewind-100k "files differ after the rewind (through the mount)"
  record rewind-100k "$V" "$REP" files 100000
  record rewind-100k "$V" "$REP" changed 100000
}
w_rewind-100k-same_setup() { "$PY" "$SF" create-tree "$S/tree" 100000; }
w_rewind-100k-same_run() { rewind_same_run rewind-100k-same tree 100000; }
# the whole Linux tree (83,731 entries, 78,579 files) removed with rm -rf, then rewound
w_rewind-linux_setup() { tar -C "$S" -xf "$FIX/linux.tar"; }
w_rewind-linux_run() {
  inside rewind-linux rm -rf "$KSRC"
  rewind_timed rewind-linux
  record rewind-linux "$V" "$REP" files "$(full_entries)"
  local d; d="$(tar_diff "$FIX/linux.tar")"
  [ -z "$d" ] || problem rewind-linux "tar -d differs through the mount after the rewind: $(echo "$d" | tr '\n' ' ')"
}

# ---------------------------------------------------------------------------------------------
# Agent workloads (issue 16). Their tools run with the options an agent would give, from the
# fixtures of bench/fixtures-agent.sh, never from the network.
# ---------------------------------------------------------------------------------------------
# npm ci --offline of npmtree's lock file (269 packages, 7.4k files) from a warm copy of npm's
# cache (copied per run, outside the folder: npm writes to its cache)
w_npm-ci_setup() {
  cp "$FIX/npmtree/package.json" "$FIX/npmtree/package-lock.json" "$S/"
  cp -a "$FIX/npm-cache" "$RUN/npm-cache"
}
npm_ci() {
  NPM_CONFIG_USERCONFIG=/dev/null npm ci --offline --cache "$RUN/npm-cache" --no-audit --no-fund \
    --ignore-scripts --no-update-notifier --loglevel=warn
}
w_npm-ci_run() { timeit npm-ci npm_ci; }
w_npm-ci_after() {
  local n want; n="$(find "$S/node_modules" -type f | wc -l)"
  want="$(cached npm-modules-files sh -c "find '$FIX/npmtree/node_modules' -type f | wc -l")"
  [ "$n" = "$want" ] || problem npm-ci "$n files in node_modules on disk, the fixture has $want"
}

# cargo build (debug, offline, hexyl and its 31 vendored dependencies compiled) of the crate of
# bench/fixtures-agent.sh, first in a fresh folder, then again after touching src/lib.rs
CRATE_DIR=hexyl
w_cargo_setup() { cp -a "$FIX/crate/$CRATE_DIR" "$S/$CRATE_DIR"; mkdir -p "$RUN/cargo-home"; }
cargo_build() {
  env -u RUSTC_WRAPPER -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET_DIR -u RUSTFLAGS \
    PATH="$FIX/rust/bin:$PATH" CARGO_HOME="$RUN/cargo-home" cargo build --offline --locked -q
}
w_cargo_run() {
  AT="$T/$CRATE_DIR" timeit cargo-first cargo_build
  inside cargo-touch touch "$CRATE_DIR/src/lib.rs"
  AT="$T/$CRATE_DIR" timeit cargo-incr cargo_build
}
w_cargo_after() { [ -x "$S/$CRATE_DIR/target/debug/$CRATE_DIR" ] || problem cargo "no target/debug/$CRATE_DIR after the build"; }

# git clone (file://, so the pack protocol as from a remote: index-pack writes the pack and the
# 7.4k files are checked out), then git checkout of branch b (1,000 files differ) and back
w_git-checkout_setup() { :; }
w_git-checkout_run() {
  timeit git-clone git clone -q -b a "file://$FIX/gitrepo.git" repo
  AT="$T/repo" timeit git-checkout git checkout -q b
  AT="$T/repo" timeit git-checkout-back git checkout -q a
}
w_git-checkout_after() {
  local st; st="$(git -C "$S/repo" status --porcelain 2>&1 | head -3)"
  [ -z "$st" ] && [ "$(git -C "$S/repo" rev-parse --abbrev-ref HEAD 2>&1)" = a ] ||
    problem git-checkout "the clone is not clean on branch a after the checkouts: $st"
}

# python3 -m venv, then pip install of the pinned requirements from the local wheels (29 wheels:
# numpy, pandas, pydantic, flask, pytest, rich, requests and their dependencies)
w_pip_setup() { cp "$FIX/requirements.txt" "$S/"; }
pip_env() { env -u PIP_FIND_LINKS -u PYTHONDONTWRITEBYTECODE PIP_CONFIG_FILE=/dev/null "$@"; }
pip_venv() { pip_env "$PY" -m venv .venv; }
pip_install() {
  pip_env .venv/bin/pip install -q --no-index --find-links "$FIX/wheels" --no-cache-dir \
    --disable-pip-version-check -r requirements.txt
}
w_pip_run() { timeit pip-venv pip_venv; timeit pip-install pip_install; }
w_pip_after() {
  "$S/.venv/bin/python" -c 'import numpy, pandas, pydantic, flask, pytest, rich, requests' >> "$LOG" 2>&1 ||
    problem pip "the installed packages do not import (on the underlying folder)"
}

# grep -r over the npm tree (7.4k files, 123 MB), cold (caches dropped after mounting) and warm;
# the same with ripgrep when it is installed (-uu: ignore files and hidden files not skipped)
w_grep_setup() { npm_into "$S"; }
grep_tree() { grep -r -l -F useState . > /dev/null; }
rg_tree() { rg -uu -l -F useState . > /dev/null; }
w_grep_run() {
  timeit grep-cold grep_tree
  timeit grep-warm grep_tree
  if command -v rg > /dev/null; then
    drop_caches
    timeit rg-cold rg_tree
    timeit rg-warm rg_tree
  fi
}

# as the user on every variant: tar -x of the subset (a user's tar restores no owners) and
# 10,000 new small files
w_untar-user_setup() { :; }
w_untar-user_run() { timeit untar-user tar -xf "$FIX/linux-sub.tar"; }
w_untar-user_after() {
  local n; n="$(count_entries "$S/$KSRC")"
  [ "$n" = "$(sub_entries)" ] || problem untar-user "$n entries on disk, the tar has $(sub_entries)"
}
w_create-user_setup() { :; }
w_create-user_run() { timeit create-user "$PY" "$SF" create small 10000; }
w_create-user_after() {
  local n; n="$(find "$S/small" -type f | wc -l)"
  [ "$n" = 10000 ] || problem create-user "$n files on disk, expected 10000"
}

# The FUSE round trip: 20,000 getxattr calls of a missing name on an open file (the kernel
# caches no xattrs, so each is a GETXATTR answered ENODATA) and 20,000 fstat calls (answered
# from the kernel's attribute cache on the default mounts; with floor-ttl0's mounts, ckpt-mount
# --ttl 0 and passthrough_hp --nocache, each is a GETATTR)
floor_run() { # LABEL
  local k v
  timeit "$1" "$PY" "$SF" floor f 20000 "$RUN/floor.txt"
  while read -r k v; do record "$1" "$V" "$REP" "$k" "$v"; done < "$RUN/floor.txt"
}
w_floor_setup() { printf 'x' > "$S/f"; }
w_floor_run() { floor_run floor; }
w_floor-ttl0_setup() { printf 'x' > "$S/f"; }
w_floor-ttl0_run() { floor_run floor-ttl0; }

# Latency tails beside a busy stager: per-operation µs (p50, p90, p99) of first writes and
# unlinks of 100-byte files, quiet (2,000 of each), then while an `rm -rf` of a copy of the
# subset (16k entries) runs in another directory of the same folder (as many of 5,000 as fit
# in the rm's time; on ckpt-mount each removed file is staged for the stager to store)
w_tails_setup() {
  "$PY" "$SF" create "$S/quiet" 2000
  "$PY" "$SF" create "$S/busyw" 5000
  "$PY" "$SF" create "$S/busyu" 5000
  mkdir "$S/a" "$S/b" && tar -C "$S/a" -xf "$FIX/linux-sub.tar" && tar -C "$S/b" -xf "$FIX/linux-sub.tar"
}
w_tails_run() {
  local l k v
  timeit firstwrite-quiet "$PY" "$SF" touch quiet "$RUN/tails-fwq.txt"
  timeit unlink-quiet "$PY" "$SF" unlink quiet "$RUN/tails-ulq.txt"
  timeit firstwrite-busy "$PY" "$SF" busy-write busyw "$RUN/tails-fwb.txt" a
  timeit unlink-busy "$PY" "$SF" busy-unlink busyu "$RUN/tails-ulb.txt" b
  for l in fwq:firstwrite-quiet ulq:unlink-quiet fwb:firstwrite-busy ulb:unlink-busy; do
    while read -r k v; do record "${l#*:}" "$V" "$REP" "$k" "$v"; done < "$RUN/tails-${l%%:*}.txt"
  done
}
w_tails_after() { [ -e "$S/a" ] || [ -e "$S/b" ] && problem tails "a tree of the rm -rf is still there"; }

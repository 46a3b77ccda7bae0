#!/usr/bin/env bash
# The fixtures of bench/run.sh's agent workloads (issue 16), made once into $FIX next to the
# shared ones (linux.tar, npmtree/, made by ../shared/bench/fixtures.sh, which this script
# needs first) and reused afterwards. Everything comes from package registries through their
# own clients (npm, cargo, pip); nothing is copied into the repo.
#
#   FIX=/tmp/ckpt-bench-fixtures bash bench/fixtures-agent.sh [PART...]   (default: every part)
#
# Parts (each is built into a temporary name and renamed when complete, so an interrupted run
# leaves nothing half made; a part that exists is left as it is):
#   npm-cache   $FIX/npm-cache: npm's cache after `npm ci` of npmtree's lock file (269 packages),
#               so `npm ci --offline --cache COPY` installs with no network
#   rust        $FIX/rust: a copy of the default Rust toolchain's bin/, lib/ and libexec/ (the
#               sysroot of `rustc`, about 600 MB), so that a user who cannot read root's ~/.rustup
#               runs the same compiler (`$FIX/rust/bin/cargo`)
#   crate       $FIX/crate/hexyl: the source of the crate CRATE (default hexyl 0.16.0, a hex viewer:
#               clap with derive, anyhow, owo-colors, terminal_size, thiserror, ...; hexyl and 31
#               dependencies to compile on Linux) from crates.io, its published Cargo.lock,
#               every dependency vendored with `cargo vendor` into vendor/ and .cargo/config.toml
#               pointing there (builds offline)
#   gitrepo     $FIX/gitrepo.git: a bare repository of the npm tree (7.4k files) with branch `a`
#               (the tree) and branch `b` (the 1,000 files of sedlist.txt with a line added at
#               the top), packed (`git gc`)
#   wheels      $FIX/wheels and $FIX/requirements.txt: `pip download` of the pinned requirements
#               below and their dependencies, binary wheels for this machine's /usr/bin/python3
#
# Environment: FIX; CRATE=name@version; PYTHON (default /usr/bin/python3: the interpreter the
# workloads use, for root and the unprivileged user alike).
set -euo pipefail

FIX="${FIX:-/tmp/ckpt-bench-fixtures}"
CRATE="${CRATE:-hexyl@0.16.0}"
PYTHON="${PYTHON:-/usr/bin/python3}"
say() { printf 'fixtures-agent.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
[ -d "$FIX/npmtree/node_modules" ] && [ -f "$FIX/sedlist.txt" ] ||
  die "$FIX/npmtree and $FIX/sedlist.txt are missing: run the shared fixtures script first"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(npm-cache rust crate gitrepo wheels)

# readable by the unprivileged user the workloads also run as
publish() { chmod -R a+rX "$1.tmp" && mv "$1.tmp" "$1"; }

npm_cache() {
  [ -d "$FIX/npm-cache" ] && return 0
  say "npm-cache: npm ci of npmtree's lock file into $FIX/npm-cache"
  local tmp; tmp="$(mktemp -d)"
  rm -rf "$FIX/npm-cache.tmp"
  cp "$FIX/npmtree/package.json" "$FIX/npmtree/package-lock.json" "$tmp/"
  (cd "$tmp" && NPM_CONFIG_USERCONFIG=/dev/null npm ci --cache "$FIX/npm-cache.tmp" --no-audit \
    --no-fund --ignore-scripts --no-update-notifier --loglevel=warn) >&2
  # prove it is complete: the same install offline
  rm -rf "$tmp/node_modules"
  (cd "$tmp" && NPM_CONFIG_USERCONFIG=/dev/null npm ci --offline --cache "$FIX/npm-cache.tmp" \
    --no-audit --no-fund --ignore-scripts --no-update-notifier --loglevel=warn) >&2
  rm -rf "$tmp" "$FIX/npm-cache.tmp/_logs"
  publish "$FIX/npm-cache"
}

rust() {
  [ -x "$FIX/rust/bin/cargo" ] && return 0
  local sysroot; sysroot="$(rustc --print sysroot)" || die "rust: no rustc on PATH"
  say "rust: copying $sysroot (bin, lib, libexec) to $FIX/rust"
  rm -rf "$FIX/rust.tmp" && mkdir -p "$FIX/rust.tmp"
  cp -a "$sysroot/bin" "$sysroot/lib" "$FIX/rust.tmp/"
  [ -d "$sysroot/libexec" ] && cp -a "$sysroot/libexec" "$FIX/rust.tmp/"
  "$FIX/rust.tmp/bin/rustc" --version > "$FIX/rust.tmp/VERSION"
  "$FIX/rust.tmp/bin/cargo" --version >> "$FIX/rust.tmp/VERSION"
  publish "$FIX/rust"
}

crate() {
  local name="${CRATE%@*}" version="${CRATE#*@}"
  [ -f "$FIX/crate/$name/.cargo/config.toml" ] && return 0
  [ -x "$FIX/rust/bin/cargo" ] || rust
  say "crate: $name $version from crates.io, dependencies vendored, into $FIX/crate/$name"
  local tmp; tmp="$(mktemp -d)"
  export CARGO_HOME="$tmp/cargo-home" PATH="$FIX/rust/bin:$PATH"
  # the crate's own published source: vendored as the one dependency of a throwaway package
  mkdir -p "$tmp/getter/src"
  printf '[package]\nname = "getter"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
    "$name" "$version" > "$tmp/getter/Cargo.toml"
  : > "$tmp/getter/src/lib.rs"
  (cd "$tmp/getter" && cargo vendor -q "$tmp/src" > /dev/null) >&2
  rm -rf "$FIX/crate.tmp" && mkdir -p "$FIX/crate.tmp"
  cp -a "$tmp/src/$name" "$FIX/crate.tmp/$name"
  rm -f "$FIX/crate.tmp/$name/.cargo-checksum.json"
  # its dependencies as its published Cargo.lock pins them
  mkdir -p "$FIX/crate.tmp/$name/.cargo"
  (cd "$FIX/crate.tmp/$name" && cargo vendor -q --locked vendor) >&2
  printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "vendor"\n' \
    > "$FIX/crate.tmp/$name/.cargo/config.toml"
  # with an empty CARGO_HOME, so that only the vendored sources can satisfy it
  (cd "$FIX/crate.tmp/$name" && CARGO_HOME="$tmp/empty-home" cargo fetch --offline --locked) >&2 ||
    die "crate: cargo fetch --offline fails on the vendored copy"
  rm -rf "$tmp"
  publish "$FIX/crate"
}

gitrepo() {
  [ -d "$FIX/gitrepo.git" ] && return 0
  say "gitrepo: branches a (the npm tree) and b (1,000 files changed) into $FIX/gitrepo.git"
  local tmp; tmp="$(mktemp -d)"
  export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
  export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
  export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
  cp -a "$FIX/npmtree" "$tmp/w"
  (
    cd "$tmp/w"
    git init -q -b a
    git add -A -f && git commit -qm "the npm tree"
    git checkout -q -b b
    xargs -d '\n' -a "$FIX/sedlist.txt" sed -i '1i // branch b'
    git commit -qam "1,000 files changed"
    [ "$(git diff --name-only a b | wc -l)" = 1000 ] || { echo "branches differ in $(git diff --name-only a b | wc -l) files" >&2; exit 1; }
  ) >&2
  rm -rf "$FIX/gitrepo.git.tmp"
  git clone -q --bare "$tmp/w" "$FIX/gitrepo.git.tmp" >&2
  git -C "$FIX/gitrepo.git.tmp" gc -q >&2
  rm -rf "$tmp"
  publish "$FIX/gitrepo.git"
}

# a small web and data project's pins (Python 3.11); their dependencies come along
REQUIREMENTS='requests==2.32.3
flask==3.1.0
pytest==8.3.4
rich==13.9.4
pydantic==2.10.4
numpy==2.2.1
pandas==2.2.3'
wheels() {
  [ -d "$FIX/wheels" ] && [ -f "$FIX/requirements.txt" ] && return 0
  say "wheels: pip download of $(echo "$REQUIREMENTS" | wc -l) pinned requirements into $FIX/wheels"
  "$PYTHON" -m venv --help > /dev/null || die "wheels: $PYTHON has no venv module (apt-get install python3-venv)"
  rm -rf "$FIX/wheels.tmp" && mkdir -p "$FIX/wheels.tmp"
  printf '%s\n' "$REQUIREMENTS" > "$FIX/requirements.txt.tmp"
  env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$PYTHON" -m pip download -q --only-binary=:all: \
    -d "$FIX/wheels.tmp" -r "$FIX/requirements.txt.tmp" >&2
  chmod a+r "$FIX/requirements.txt.tmp"
  publish "$FIX/wheels"
  mv "$FIX/requirements.txt.tmp" "$FIX/requirements.txt"
}

for p in "${parts[@]}"; do
  case "$p" in
    npm-cache) npm_cache ;;
    rust) rust ;;
    crate) crate ;;
    gitrepo) gitrepo ;;
    wheels) wheels ;;
    *) die "unknown part $p (npm-cache rust crate gitrepo wheels)" ;;
  esac
done

#!/usr/bin/env bash
# Builds the benchmark's FUSE peers that Debian ships no binary of, from Debian source packages,
# into a cache folder outside the repo. Nothing it fetches or builds belongs in the repo.
#
#   bench/peers.sh [passthrough-hp]         build it if it is not there yet; print the binary's
#                                            path on stdout (progress and tool output go to stderr)
#   bench/peers.sh passthrough-hp-uring     the same example from a libfuse that speaks FUSE over
#                                            io_uring (`-o io_uring`), for bench/uring.sh
#
# passthrough-hp: libfuse's example/passthrough_hp.cc, from Debian's fuse3 source package
#   (FUSE3_VERSION of suite FUSE3_SUITE; if the suite no longer has that version, its current
#   fuse3, said so on stderr and in the .info file), built with meson and ninja, libfuse linked
#   statically: the system's libfuse3 stays as it is. Makes $PEERS_DIR/passthrough_hp and
#   passthrough_hp.info (one line: what was built, from what), and keeps the downloaded source
#   package and its build in $PEERS_DIR/fuse3-VERSION/ to read.
# passthrough-hp-uring: the same from FUSE3_URING_VERSION of FUSE3_URING_SUITE (libfuse >= 3.18
#   has the io_uring transport), built against liburing and libnuma (installed with apt-get when
#   missing; libfuse leaves io_uring out without them, so the build checks that it is in).
#   Makes $PEERS_DIR/passthrough_hp_uring and .info.
#
# Environment:
#   PEERS_DIR=/tmp/ckpt-bench-peers   the cache
#   FUSE3_VERSION=3.17.2-3            Debian version of fuse3 to build ("" = the suite's current)
#   FUSE3_SUITE=trixie                the Debian suite to take the source from
#   FUSE3_URING_VERSION=3.18.3-1      the same for passthrough-hp-uring
#   FUSE3_URING_SUITE=sid
#   DEBIAN_ARCHIVE=URI                the archive to download from (default: the URI of the
#                                     Debian archive in this machine's own apt sources)
#
# apt runs with a private configuration (its own deb-src sources, package lists and cache in a
# temporary folder), so the machine's apt sources and lists are not changed. The chain of trust
# is apt's: the suite's InRelease must be signed by a key of debian-archive-keyring, and
# `apt-get source` checks every downloaded file against the hashes of the signed Sources index
# (it fails on a mismatch); `dpkg-source -x` then checks the files against the .dsc again (and
# the maintainer's signature of the .dsc, which it requires when debian-keyring is installed).
# Missing build tools (meson, ninja-build, pkg-config, g++, dpkg-dev) are installed with
# apt-get from the machine's own sources. Needs root for that and for apt's download sandbox.
set -euo pipefail

PEERS_DIR="${PEERS_DIR:-/tmp/ckpt-bench-peers}"
FUSE3_VERSION="${FUSE3_VERSION-3.17.2-3}"
FUSE3_SUITE="${FUSE3_SUITE:-trixie}"
FUSE3_URING_VERSION="${FUSE3_URING_VERSION-3.18.3-1}"
FUSE3_URING_SUITE="${FUSE3_URING_SUITE:-sid}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

say() { printf 'peers.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# the Debian archive of this machine's apt sources (the URI of the first package list whose
# release is o=Debian, l=Debian: not the security archive), from `apt-cache policy`
debian_archive() {
  apt-cache policy 2>/dev/null | awk '
    /^ *-?[0-9]+ [a-z+]+:\/\// { uri = $2; next }
    /^ +release / && uri != "" && /o=Debian,/ && /l=Debian(,|$)/ { print uri; exit }
    { uri = "" }'
}

# install the build tools that are missing (command, package), and with URING=1 the libraries
# libfuse's io_uring transport needs (pkg-config name, package)
need_tools() {
  local uring="$1" missing=() pair
  for pair in meson:meson ninja:ninja-build pkg-config:pkg-config g++:g++ dpkg-source:dpkg-dev \
              xz:xz-utils; do
    command -v "${pair%%:*}" > /dev/null || missing+=("${pair#*:}")
  done
  if [ "$uring" = 1 ]; then
    for pair in liburing:liburing-dev numa:libnuma-dev; do
      pkg-config --exists "${pair%%:*}" 2> /dev/null || missing+=("${pair#*:}")
    done
  fi
  [ "${#missing[@]}" = 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing ${missing[*]} (and not root, so not installing them)"
  say "installing ${missing[*]}"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; } ||
    die "apt-get install ${missing[*]} failed"
}

# build_passthrough_hp NAME VERSION SUITE URING: example/passthrough_hp of Debian's fuse3 VERSION
# ("" = the suite's current) of SUITE as $PEERS_DIR/NAME; URING=1 requires the io_uring transport
build_passthrough_hp() {
  local name="$1" version="$2" suite="$3" uring="$4"
  local bin="$PEERS_DIR/$name" key="fuse3=${version:-current} suite=$suite uring=$uring"
  mkdir -p "$PEERS_DIR"
  # one build at a time (two benchmark runs with different WORK folders may share the cache)
  exec 8> "$PEERS_DIR/.lock"
  flock 8
  if [ -x "$bin" ] && [ -s "$bin.info" ] && [ "$(cat "$bin.key" 2>/dev/null)" = "$key" ]; then
    echo "$bin"
    return 0
  fi
  local t0="$EPOCHREALTIME"
  need_tools "$uring"

  local archive="${DEBIAN_ARCHIVE:-}"
  if [ -z "$archive" ]; then
    archive="$(debian_archive)"
    # a machine whose package lists were never downloaded has no release lines yet
    [ -n "$archive" ] || { apt-get update -q >&2 || true; archive="$(debian_archive)"; }
  fi
  [ -n "$archive" ] || die "no Debian archive in this machine's apt sources; set DEBIAN_ARCHIVE=URI"
  [ -f "$KEYRING" ] || die "$KEYRING missing (package debian-archive-keyring)"

  local tmp
  tmp="$(mktemp -d /tmp/ckpt-peers-apt.XXXXXX)"
  # shellcheck disable=SC2064 # $tmp is fixed now
  trap "rm -rf '$tmp'" EXIT
  chmod 755 "$tmp"  # apt's download sandbox (user _apt) must reach lists/partial
  mkdir -p "$tmp/sources" "$tmp/lists/partial" "$tmp/cache/archives/partial"
  cat > "$tmp/sources/peers.sources" <<EOF
Types: deb-src
URIs: $archive
Suites: $suite
Components: main
Signed-By: $KEYRING
EOF
  local apt=(apt-get -q -o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$tmp/sources"
             -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
  say "apt-get update of deb-src $archive $suite main (private lists in $tmp)"
  "${apt[@]}" update >&2 || die "apt-get update of the deb-src list failed"
  compgen -G "$tmp/lists/*_dists_${suite}_main_source_Sources*" > /dev/null ||
    die "no signed Sources index of $suite after apt-get update (see above)"

  # download into a folder of the sandbox user's, then keep it as fuse3-VERSION/
  local dl="$PEERS_DIR/download.tmp"
  rm -rf "$dl" && mkdir -p "$dl"
  chown _apt "$dl" 2>/dev/null || true
  local note=""
  if ! (cd "$dl" && "${apt[@]}" source --download-only "fuse3${version:+=$version}" >&2); then
    [ -n "$version" ] || die "apt-get source fuse3 from $suite failed"
    note="; fuse3=$version is no longer in $suite, so its current fuse3 was built"
    say "fuse3=$version is not in $suite; taking the suite's current fuse3"
    rm -rf "$dl" && mkdir -p "$dl" && { chown _apt "$dl" 2>/dev/null || true; }
    (cd "$dl" && "${apt[@]}" source --download-only fuse3 >&2) || die "apt-get source fuse3 from $suite failed"
  fi
  local dsc ver upstream
  dsc="$(cd "$dl" && compgen -G 'fuse3_*.dsc' | head -1)" || die "no fuse3 .dsc downloaded"
  ver="$(awk '/^Version: / { print $2; exit }' "$dl/$dsc")"
  upstream="${ver%-*}"
  local pkg="$PEERS_DIR/fuse3-$ver"
  rm -rf "$pkg" && mv "$dl" "$pkg" && chown -R root "$pkg"

  local sig=()
  [ -f /usr/share/keyrings/debian-keyring.gpg ] && sig=(--require-valid-signature)
  say "dpkg-source -x $dsc (checks the files against the .dsc)"
  (cd "$pkg" && dpkg-source "${sig[@]}" -x "$dsc" src >&2) || die "dpkg-source -x $dsc failed"

  local src="$pkg/src"
  [ -f "$src/example/passthrough_hp.cc" ] || die "no example/passthrough_hp.cc in fuse3 $ver"
  # examples only: no fusermount3 or udev rules (utils), no test programs; a static libfuse
  # inside the binary, so nothing is installed and the system's libfuse3 is not used
  local opts=(-Dexamples=true -Dutils=false -Dtests=false -Ddefault_library=static -Dbuildtype=release)
  local o
  [ "$uring" = 1 ] && opts+=(-Denable-io-uring=true)
  for o in examples utils tests $([ "$uring" = 1 ] && echo enable-io-uring); do
    grep -q "option('$o'" "$src/meson_options.txt" || die "fuse3 $ver's meson_options.txt has no option $o"
  done
  say "meson setup ${opts[*]}; ninja example/passthrough_hp"
  (cd "$src" && rm -rf build && meson setup build "${opts[@]}" >&2 && ninja -C build example/passthrough_hp >&2) ||
    die "the build of passthrough_hp failed"
  # libfuse drops the transport silently when liburing or libnuma is missing or too old
  if [ "$uring" = 1 ] && ! grep -qs '^#define HAVE_URING' "$src/build/fuse_config.h"; then
    die "fuse3 $ver was built without io_uring (no HAVE_URING in build/fuse_config.h)"
  fi
  local out="$src/build/example/passthrough_hp"
  "$out" --help > /dev/null || die "the built passthrough_hp does not run"
  if ldd "$out" 2>/dev/null | grep -q libfuse; then die "the built passthrough_hp links a shared libfuse"; fi
  if [ "$uring" = 1 ] && ! "$out" --help 2>&1 | grep -q 'io_uring'; then
    die "the built passthrough_hp has no -o io_uring option"
  fi

  cp "$out" "$bin.tmp" && mv "$bin.tmp" "$bin"
  local with=""
  [ "$uring" = 1 ] && with="; with the io_uring transport (liburing $(pkg-config --modversion liburing))"
  printf 'libfuse %s example/passthrough_hp (Debian source package fuse3 %s, %s; libfuse linked statically%s; %s; built %s%s)\n' \
    "$upstream" "$ver" "$suite" "$with" "$(c++ --version | head -1)" "$(date -u '+%Y-%m-%d')" "$note" > "$bin.info"
  echo "$key" > "$bin.key"
  say "built $bin ($(stat -c %s "$bin") bytes) in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s: $(cat "$bin.info")"
  echo "$bin"
}

case "${1:-passthrough-hp}" in
  passthrough-hp) build_passthrough_hp passthrough_hp "$FUSE3_VERSION" "$FUSE3_SUITE" 0 ;;
  passthrough-hp-uring) build_passthrough_hp passthrough_hp_uring "$FUSE3_URING_VERSION" "$FUSE3_URING_SUITE" 1 ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" ;;
  *) die "unknown peer ${1}: the ones this script builds are passthrough-hp and passthrough-hp-uring" ;;
esac

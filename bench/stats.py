#!/usr/bin/env python3
"""Turns bench/run.sh's raw measurements into the Markdown results.

  stats.py --raw RAW.tsv [--meta META.txt] [--problems PROBLEMS.md]

RAW.tsv rows: label, variant, repetition, metric, value (tab-separated). Metrics: sec (wall
seconds), cpu (daemon CPU seconds during the step), rss_kb (daemon VmHWM after the step),
median_us/p90_us/p99_us/mean_us/total_s/n (first-write loop), raw_bytes/blob_bytes/blob_du/
blobs/journal_bytes (store after unmount), files and changed (rewind size), cli_rss_kb (the
rewind CLI's peak RSS), getxattr_us/fstat_us (round-trip floor), busy_s/rm_rc (latency tails
beside an rm -rf), error (exit status).
Every cell is the median over the repetitions.
"""
import argparse
import statistics
from collections import OrderedDict, defaultdict

FS_VARIANTS = ["native", "bindfs", "bindfs-tuned", "passthrough-hp", "ckpt", "ckpt-user"]
VNAME = {"native": "plain dir", "bindfs": "bindfs", "bindfs-tuned": "bindfs tuned",
         "passthrough-hp": "passthrough_hp", "ckpt": "ckpt-mount", "ckpt-user": "ckpt-mount (user)",
         "ckpt-kperm": "ckpt-mount --kernel-permissions",
         "ckpt-user-base": "ckpt-mount (user), base binary"}
# the other FUSE passthroughs ckpt-mount is compared with, and their short names in ratio columns
PEERS = ["bindfs", "bindfs-tuned", "passthrough-hp"]
PEER_SHORT = {"bindfs": "bindfs", "bindfs-tuned": "tuned", "passthrough-hp": "pt_hp"}

# (label, metric, shown name)
MAIN = [
    ("untar-linux", "sec", "untar Linux 6.1 (78,579 files, 1.36 GB), cold cache"),
    ("untar-sub", "sec", "untar Linux subset (16,111 entries, 207 MB), cold cache"),
    ("walk-cold", "sec", "stat every entry of the subset (`find -printf`), cold"),
    ("walk-warm", "sec", "stat every entry of the subset, warm (second walk)"),
    ("git-add", "sec", "`git init && git add -A` of the npm tree (7.4k files)"),
    ("git-status", "sec", "`git status` of the npm tree after add"),
    ("git-status-again", "sec", "`git status` again"),
    ("create-10k", "sec", "create 10,000 files of 100 B (python3)"),
    ("rm-rf", "sec", "`rm -rf` of the untarred subset (every file captured)"),
    ("sed-i", "sec", "`sed -i` over 1,000 .js files of the npm tree"),
    ("cp-r", "sec", "`cp -r` of the npm tree into the folder"),
    ("dd-write", "sec", "1 GiB sequential write (dd bs=1M)"),
    ("dd-write-fdatasync", "sec", "1 GiB sequential write, conv=fdatasync"),
    ("dd-read-warm", "sec", "1 GiB sequential read, warm (second read)"),
    ("dd-read-cold", "sec", "1 GiB sequential read, cold (caches dropped)"),
    ("tsc-first", "sec", "build: `tsc -p` of src/ + React types, first in a fresh mount"),
    ("tsc-again", "sec", "build: the same `tsc -p` again"),
    ("firstwrite", "median_us", "first write of a small file, µs per file (median of 10k)"),
    ("secondwrite", "median_us", "second write of the same file, same turn, µs (median)"),
    ("firstwrite", "sec", "first-write loop over 10k files, total"),
]
# issue 16: what agents run (as root; ckpt-mount (user) runs them as the unprivileged user)
AGENT = [
    ("npm-ci", "sec", "`npm ci --offline`, warm cache (269 packages, 7.4k files)"),
    ("cargo-first", "sec", "`cargo build` of hexyl and its 31 vendored dependencies, first"),
    ("cargo-incr", "sec", "`cargo build` again after touching src/lib.rs"),
    ("git-clone", "sec", "`git clone` (file://) of the npm tree's repository (7.4k files)"),
    ("git-checkout", "sec", "`git checkout` of a branch 1,000 files away"),
    ("git-checkout-back", "sec", "`git checkout` back"),
    ("pip-venv", "sec", "`python3 -m venv`"),
    ("pip-install", "sec", "`pip install` of 7 pinned requirements (29 wheels), local wheels"),
    ("grep-cold", "sec", "`grep -r` over the npm tree, cold"),
    ("grep-warm", "sec", "`grep -r` over the npm tree, warm"),
    ("rg-cold", "sec", "`rg -uu` over the npm tree, cold"),
    ("rg-warm", "sec", "`rg -uu` over the npm tree, warm"),
]
# run as the unprivileged user on every variant (peers mounted by that user; "ckpt-mount" is
# root's mount with allow_other)
USER = [
    ("untar-user", "sec", "untar of the subset (16,111 entries) as a user, cold"),
    ("create-user", "sec", "create 10,000 files of 100 B as a user (python3)"),
]
TAILS = [("firstwrite-quiet", "first write, quiet"), ("unlink-quiet", "unlink, quiet"),
         ("firstwrite-busy", "first write beside `rm -rf`"), ("unlink-busy", "unlink beside `rm -rf`")]
REWIND_DESC = {
    "rewind-rmrf": "after `rm -rf` of the subset (recreate every entry)",
    "rewind-linux": "after `rm -rf` of the Linux tree (recreate every entry)",
    "rewind-10000-same": "10,000 files captured, 1 in 100 changed",
    "rewind-100k": "100,000 files in 100 directories, all changed",
    "rewind-100k-same": "100,000 files captured, 1 in 100 changed",
}


def fmt_s(x):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_ratio(a, b):
    if a is None or b is None or b <= 0:
        return "–"
    return f"{a / b:.2f}×"


def fmt_bytes(x):
    if x is None:
        return "–"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= div:
            return f"{x / div:.1f} {unit}"
    return f"{x:.0f} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--problems", help="label, variant, rep, message (tab-separated)")
    a = ap.parse_args()

    vals = defaultdict(list)   # (label, variant, metric) -> [values in rep order]
    errors = defaultdict(int)  # (label, variant) -> failed runs
    labels = OrderedDict()
    byrep = defaultdict(dict)  # (label, variant, metric) -> {rep: value}
    with open(a.raw) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            label, variant, rep, metric, value = parts
            labels[label] = True
            if metric == "error":
                errors[(label, variant)] += 1
                continue
            try:
                vals[(label, variant, metric)].append(float(value))
                byrep[(label, variant, metric)][rep] = float(value)
            except ValueError:
                pass

    def med(label, variant, metric):
        xs = vals.get((label, variant, metric))
        return statistics.median(xs) if xs else None

    def n_of(label, metric):
        return max((len(vals.get((label, v, metric), [])) for v in FS_VARIANTS + ["ckpt-kperm", "ckpt-user-base", "git-stash", "shadow-git"]), default=0)

    meta = OrderedDict()
    if a.meta:
        with open(a.meta) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    if k == "elapsed_part":  # segments of a run continued with --resume
                        meta["parts"] = meta.get("parts", 0.0) + float(v)
                        meta["segments"] = meta.get("segments", 1) + 1
                        continue
                    meta[k] = v

    out = []
    p = out.append
    p(f"# ckpt-mount benchmark — {meta.get('date', '?')} ({meta.get('mode', '?')})")
    p("")
    el = meta.get("elapsed_s")
    if el is not None and "parts" in meta:
        el = float(el) + meta["parts"]
    p(f"- commit {meta.get('git', '?')}, binary {meta.get('binary', '?')}")
    p(f"- Linux {meta.get('kernel', '?')}, {meta.get('cpus', '?')} CPUs, {meta.get('mem', '?')}; "
      f"{meta.get('bindfs', '?')}")
    p(f"- repetitions: {meta.get('reps', '?')} (long workloads {meta.get('long_reps', '?')}), "
      "variants interleaved per repetition, medians shown")
    p(f"- load average at start {meta.get('load_start', '?')}, at end {meta.get('load_end', '?')} "
      "(the machine is shared: compare ratios, not absolute times)")
    if el:
        seg = f" in {meta['segments']} segments (interrupted, continued with --resume: {meta.get('resumed', '')})" if "segments" in meta else ""
        p(f"- total run time {float(el) / 60:.1f} min{seg}")
    p(f"- workloads ran on: {meta.get('fs', 'the host filesystem of $WORK')}")
    p(f"- bindfs: `bindfs --no-allow-other SRC MNT`; bindfs tuned: `{meta.get('bindfs_tuned', '?')}`; "
      f"ckpt-mount: {meta.get('ckpt_options', 'defaults')}, mounted over the folder, in turn 2")
    if "passthrough_hp" in meta:
        opts = meta.get("passthrough_hp_options", "")
        p(f"- passthrough_hp: {meta['passthrough_hp']}"
          + ("" if meta["passthrough_hp"].startswith("not run") else f"; run as {opts}"))
    for k, what in (("ckpt_user", "ckpt-mount (user)"), ("python", "python"), ("rust", "Rust toolchain (cargo workload)"),
                     ("rg", "ripgrep")):
        if k in meta:
            p(f"- {what}: {meta[k]}")
    p("")

    # a ratio against a variant whose run failed (e.g. passthrough_hp out of descriptors) is no
    # comparison: "failed" instead of a number; the best peer is the fastest peer that did not fail
    def ratio_to(label, m, a, b):
        if errors.get((label, b)) and m.get(b) is not None:
            return "failed"
        return fmt_ratio(m.get(a), m.get(b))

    def best_peer(label, m, a="ckpt"):
        ok = [v for v in PEERS if m.get(v) is not None and m[v] > 0 and not errors.get((label, v))]
        if not ok or m.get(a) is None:
            return "–"
        v = min(ok, key=lambda x: m[x])
        return f"{fmt_ratio(m[a], m[v])} ({PEER_SHORT[v]})"

    f2 = lambda x: "–" if x is None else f"{x:.2f}"
    mib = lambda x: "–" if x is None else f"{x / 1024:.0f}"

    def total_cpu(label, v):
        """the workload's processes plus the FUSE server, summed per run"""
        w = byrep.get((label, v, "wcpu"), {})
        d = byrep.get((label, v, "cpu"), {})
        xs = [w[r] + d.get(r, 0.0) for r in w if v == "native" or r in d]
        return statistics.median(xs) if xs else None

    # one FUSE round trip of ckpt-mount over the plain folder's getxattr, in seconds, when the run
    # measured the floor: a workload's excess over plain reads as so many round trips
    rt = None
    if med("floor", "ckpt", "getxattr_us") is not None and med("floor", "native", "getxattr_us") is not None:
        rt = (med("floor", "ckpt", "getxattr_us") - med("floor", "native", "getxattr_us")) / 1e6
        rt = rt if rt > 0 else None

    def round_trips(m):
        if rt is None or m.get("ckpt") is None or m.get("native") is None:
            return "–"
        return f"{(m['ckpt'] - m['native']) / rt / 1000:.1f}k"

    def workload_tables(rows, title, intro):
        rows = [r for r in rows if any(med(r[0], v, r[1]) is not None for v in FS_VARIANTS)]
        if not rows:
            return
        p(f"## {title}")
        p("")
        if intro:
            p(intro)
            p("")
        p("| workload | n | plain dir | bindfs | bindfs tuned | passthrough_hp | ckpt-mount | ckpt-mount (user) "
          "| pt_hp/plain | ckpt/plain | ckpt/bindfs | ckpt/tuned | ckpt/pt_hp | ckpt/best peer "
          "| user/plain | user/ckpt | user/best peer | ckpt daemon CPU s | user daemon CPU s "
          "| ckpt peak RSS MiB | ckpt − plain in round trips |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label, metric, name in rows:
            m = {v: med(label, v, metric) for v in FS_VARIANTS}
            cells = []
            for v in FS_VARIANTS:
                c = fmt_s(m[v]) if metric == "sec" else (f"{m[v]:.1f}" if m[v] is not None else "–")
                if errors.get((label, v)):
                    c += f" (FAILED ×{errors[(label, v)]})"
                cells.append(c)
            cpu = med(label, "ckpt", "cpu") if metric == "sec" else None
            ucpu = med(label, "ckpt-user", "cpu") if metric == "sec" else None
            rss = med(label, "ckpt", "rss_kb") if metric == "sec" else None
            p(f"| {name} | {n_of(label, metric)} | " + " | ".join(cells) + " | "
              f"{'failed' if errors.get((label, 'passthrough-hp')) and m['passthrough-hp'] is not None else fmt_ratio(m['passthrough-hp'], m['native'])} | "
              f"{ratio_to(label, m, 'ckpt', 'native')} | "
              + " | ".join(ratio_to(label, m, "ckpt", v) for v in PEERS) + " | "
              f"{best_peer(label, m)} | {ratio_to(label, m, 'ckpt-user', 'native')} | "
              f"{ratio_to(label, m, 'ckpt-user', 'ckpt')} | {best_peer(label, m, 'ckpt-user')} | "
              f"{f2(cpu)} | {f2(ucpu)} | {mib(rss)} | {round_trips(m) if metric == 'sec' else '–'} |")
        p("")
        p("ckpt-mount (user) is the mount of an unprivileged user (no kernel passthrough: the "
          "daemon serves every read and write); user/ckpt is its time over root's mount's. "
          "The last column divides ckpt-mount's excess over the plain folder by its round trip "
          "(the `floor` workload's getxattr, over plain; \"–\" when the run did not measure it): "
          "how many requests' worth of waiting the excess is.")
        p("")
        p(f"### {title}: FUSE server CPU seconds during each step (median)")
        p("")
        p("| workload | bindfs | bindfs tuned | passthrough_hp | ckpt-mount | ckpt-mount (user) "
          "| ckpt-mount / bindfs | ckpt-mount / passthrough_hp |")
        p("|---|---|---|---|---|---|---|---|")
        for label, metric, name in rows:
            if metric != "sec":
                continue
            c = {v: med(label, v, "cpu") for v in PEERS + ["ckpt", "ckpt-user"]}
            if all(x is None for x in c.values()):
                continue
            p(f"| {name} | " + " | ".join(f2(c[v]) for v in PEERS + ["ckpt", "ckpt-user"]) + " | "
              f"{ratio_to(label, c, 'ckpt', 'bindfs')} | {ratio_to(label, c, 'ckpt', 'passthrough-hp')} |")
        p("")
        p(f"### {title}: total CPU seconds, the workload's processes + the FUSE server (median)")
        p("")
        p("Less sensitive to a busy machine than wall time: what the work cost, wherever it ran.")
        p("")
        p("| workload | plain dir | bindfs | bindfs tuned | passthrough_hp | ckpt-mount | ckpt-mount (user) "
          "| ckpt/plain | ckpt/bindfs | ckpt/pt_hp | ckpt/best peer | user/ckpt |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label, metric, name in rows:
            if metric != "sec":
                continue
            c = {v: total_cpu(label, v) for v in FS_VARIANTS}
            if all(x is None for x in c.values()):
                continue
            p(f"| {name} | " + " | ".join(f2(c[v]) for v in FS_VARIANTS) + " | "
              f"{fmt_ratio(c['ckpt'], c['native'])} | {ratio_to(label, c, 'ckpt', 'bindfs')} | "
              f"{ratio_to(label, c, 'ckpt', 'passthrough-hp')} | {best_peer(label, c)} | "
              f"{ratio_to(label, c, 'ckpt-user', 'ckpt')} |")
        p("")

    workload_tables(MAIN, "Workloads (median seconds unless marked µs)",
                    "CPU is the daemon's utime+stime (/proc/PID/stat) during the step; peak RSS is VmHWM "
                    "(/proc/PID/status) after it. pt_hp is libfuse's passthrough_hp; the best peer is the "
                    "fastest of bindfs, bindfs tuned and passthrough_hp on that workload, among those whose "
                    "runs did not fail (a ratio against a failed run reads \"failed\").")
    workload_tables(AGENT, "Agent workloads (median seconds)",
                    "What coding agents run, from local fixtures (no network), as root; ckpt-mount (user) "
                    "runs them as the unprivileged user on that user's mount.")
    workload_tables(USER, "Run as an unprivileged user (median seconds)",
                    "Every variant runs the workload as the user: the peers are mounted by that user "
                    "(passthrough_hp with --nopassthrough), \"ckpt-mount\" is root's mount with "
                    "--allow-other (kernel passthrough), \"ckpt-mount (user)\" the user's own mount.")

    # -- the permission lever (KPERM=1): host checks (the default) against the kernel's
    kp = [r for r in MAIN + AGENT if r[1] == "sec" and med(r[0], "ckpt-kperm", "sec") is not None]
    if kp:
        p("## Permission checks: the host's (default) against the kernel's (`--kernel-permissions`)")
        p("")
        p("ckpt-mount is the default single-user mount, whose permission checks the host "
          "filesystem makes (no `default_permissions`, so no `GETATTR` of the parent after each "
          "create, unlink and rename); ckpt-kperm is the same mount with `--kernel-permissions`, "
          "as before that lever. Both ran interleaved with the peers in every repetition.")
        p("")
        p("| workload | n | plain dir | best peer | ckpt-mount | ckpt-kperm | ckpt/kperm "
          "| ckpt/plain | kperm/plain | ckpt/best peer | kperm/best peer | daemon CPU s ckpt / kperm |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label, metric, name in kp:
            m = {v: med(label, v, metric) for v in FS_VARIANTS + ["ckpt-kperm"]}
            ok = [v for v in PEERS if m.get(v) is not None and m[v] > 0 and not errors.get((label, v))]
            best = min(ok, key=lambda x: m[x]) if ok else None
            bcell = f"{fmt_s(m[best])} ({PEER_SHORT[best]})" if best else "–"
            cpu = f"{f2(med(label, 'ckpt', 'cpu'))} / {f2(med(label, 'ckpt-kperm', 'cpu'))}"
            p(f"| {name} | {n_of(label, metric)} | {fmt_s(m['native'])} | {bcell} | {fmt_s(m['ckpt'])} | "
              f"{fmt_s(m['ckpt-kperm'])} | {ratio_to(label, m, 'ckpt', 'ckpt-kperm')} | "
              f"{ratio_to(label, m, 'ckpt', 'native')} | {ratio_to(label, m, 'ckpt-kperm', 'native')} | "
              f"{best_peer(label, m)} | {best_peer(label, m, 'ckpt-kperm')} | {cpu} |")
        p("")

    # -- BASE_BIN: the user's mount of this binary against the same mount of the base binary
    ub = [r for r in MAIN + AGENT + USER
          if r[1] == "sec" and med(r[0], "ckpt-user-base", "sec") is not None]
    if ub:
        p("## The user's mount: this binary against the base binary (`BASE_BIN`)")
        p("")
        p(f"ckpt-user is the user's own mount made by this binary, ckpt-user-base the same mount "
          f"made by {meta.get('base_binary', 'the base binary')}; both ran "
          "interleaved with the other variants in every repetition.")
        p("")
        p("| workload | n | plain dir | ckpt-user | ckpt-user-base | user/base | user/plain "
          "| base/plain | daemon CPU s user / base |")
        p("|---|---|---|---|---|---|---|---|---|")
        for label, metric, name in ub:
            m = {v: med(label, v, metric) for v in ["native", "ckpt-user", "ckpt-user-base"]}
            cpu = f"{f2(med(label, 'ckpt-user', 'cpu'))} / {f2(med(label, 'ckpt-user-base', 'cpu'))}"
            p(f"| {name} | {n_of(label, metric)} | {fmt_s(m['native'])} | {fmt_s(m['ckpt-user'])} | "
              f"{fmt_s(m['ckpt-user-base'])} | {ratio_to(label, m, 'ckpt-user', 'ckpt-user-base')} | "
              f"{ratio_to(label, m, 'ckpt-user', 'native')} | "
              f"{ratio_to(label, m, 'ckpt-user-base', 'native')} | {cpu} |")
        p("")

    # -- the FUSE round-trip floor
    fl = [v for v in FS_VARIANTS if med("floor", v, "getxattr_us") is not None
          or med("floor-ttl0", v, "getxattr_us") is not None]
    if fl:
        p("## FUSE round-trip floor (µs per call; median over batches of 1,000)")
        p("")
        p("| variant | getxattr of a missing name (1 GETXATTR) | over plain | fstat, default mount (cached) "
          "| getxattr, TTL 0 mount | fstat, TTL 0 mount (1 GETATTR) | over plain |")
        p("|---|---|---|---|---|---|---|")
        g0 = med("floor", "native", "getxattr_us")
        s0 = med("floor-ttl0", "native", "fstat_us")
        us = lambda x: "–" if x is None else f"{x:.1f}"
        over = lambda x, b: "–" if x is None or b is None else f"+{x - b:.1f}"
        for v in fl:
            g = med("floor", v, "getxattr_us")
            st = med("floor-ttl0", v, "fstat_us")
            p(f"| {VNAME[v]} | {us(g)} | {over(g, g0)} | {us(med('floor', v, 'fstat_us'))} | "
              f"{us(med('floor-ttl0', v, 'getxattr_us'))} | {us(st)} | {over(st, s0)} |")
        p("")
        p("A workload's time over the plain directory is roughly the requests the kernel sends "
          "for it (those it cannot answer from its caches) times this round trip, plus the "
          "server's own work. TTL 0 mounts: ckpt-mount `--ttl 0`, passthrough_hp `--nocache`.")
        p("")

    # -- latency tails
    if any(med(l, v, "median_us") is not None for l, _ in TAILS for v in FS_VARIANTS):
        p("## Latency tails: first write and unlink of a 100-byte file, µs, quiet and beside `rm -rf`")
        p("")
        p("| operation | variant | n | p50 | p90 | p99 | mean | rm -rf s |")
        p("|---|---|---|---|---|---|---|---|")
        for label, what in TAILS:
            for v in FS_VARIANTS:
                ms = [med(label, v, k) for k in ("median_us", "p90_us", "p99_us", "mean_us")]
                if ms[0] is None:
                    continue
                n = med(label, v, "n")
                b = med(label, v, "busy_s")
                p(f"| {what} | {VNAME[v]} | {n or 0:.0f} | " + " | ".join(f"{x:.1f}" for x in ms)
                  + f" | {'–' if b is None else fmt_s(b)} |")
        p("")
        p("Beside `rm -rf`: the operations done while an `rm -rf` of a copy of the subset ran in "
          "another directory of the same folder (n: how many fit in its time; on ckpt-mount each "
          "removed file is staged for the stager to store meanwhile).")
        p("")

    # -- first-write latency detail
    if any(med("firstwrite", v, "median_us") is not None for v in FS_VARIANTS):
        p("### Small-file write latency, µs per file (open r+b, write 1 byte, close)")
        p("")
        p("| loop | variant | median | p90 | p99 | mean |")
        p("|---|---|---|---|---|---|")
        for label, what in (("firstwrite", "first write in a fresh turn"),
                            ("secondwrite", "second write, same turn")):
            for v in FS_VARIANTS:
                ms = [med(label, v, k) for k in ("median_us", "p90_us", "p99_us", "mean_us")]
                if ms[0] is None:
                    continue
                p(f"| {what} | {VNAME[v]} | " + " | ".join(f"{x:.1f}" for x in ms) + " |")
        p("")

    # -- turns
    trees = [t for t in ("npm", "linux", "linux-sub") if f"turn-{t}" in labels]
    if trees:
        tname = {"npm": "npm tree (7.4k files)", "linux": "Linux tree (78.6k files)",
                 "linux-sub": "Linux subset (16.1k entries)"}
        p("## A turn that edits 4 files (median milliseconds)")
        p("")
        p("| tree | plain: 4 edits | ckpt-mount: `echo N > .ckpt/turn` + 4 edits | ckpt-mount: turn switch alone "
          "| `git add -A && git stash create` + 4 edits | shadow git `add -A -f && commit` + 4 edits "
          "| shadow git: first snapshot (once) | ckpt-mount (user): `echo N` + 4 edits |")
        p("|---|---|---|---|---|---|---|---|")
        ms = lambda x: "–" if x is None else f"{x * 1000:.1f}"
        for t in trees:
            L = f"turn-{t}"
            p(f"| {tname[t]} | {ms(med(L, 'native', 'sec'))} | {ms(med(L, 'ckpt', 'sec'))} | "
              f"{ms(med(f'turnswitch-{t}', 'ckpt', 'sec'))} | {ms(med(L, 'git-stash', 'sec'))} | "
              f"{ms(med(L, 'shadow-git', 'sec'))} | {ms(med(f'shadow-initial-{t}', 'shadow-git', 'sec'))} | "
              f"{ms(med(L, 'ckpt-user', 'sec'))} |")
        p("")
        p("The git recipes run on the plain folder, after the previous turn's 4 edits (so each "
          "checkpoint has something to record); ckpt-mount's cost is the turn switch plus the 4 "
          "captures on first write. Every cell is one `sh -c` (about 1–2 ms of it is starting "
          "the shell), so the checkpoint's own cost is what each adds over the plain 4 edits:")
        p("")
        p("| tree | ckpt-mount adds | `git stash create` adds | shadow git adds | git stash / ckpt-mount | shadow git / ckpt-mount |")
        p("|---|---|---|---|---|---|")
        for t in trees:
            L = f"turn-{t}"
            base = med(L, "native", "sec")
            add = {v: (None if base is None or med(L, v, "sec") is None else med(L, v, "sec") - base)
                   for v in ("ckpt", "git-stash", "shadow-git")}
            ratio = lambda v: ("–" if add[v] is None or not add["ckpt"] or add["ckpt"] <= 0
                               else f"{add[v] / add['ckpt']:.0f}×")
            p(f"| {tname[t]} | {ms(add['ckpt'])} | {ms(add['git-stash'])} | {ms(add['shadow-git'])} | "
              f"{ratio('git-stash')} | {ratio('shadow-git')} |")
        p("")

    # -- rewinds
    rw = [l for l in labels if l.startswith("rewind-")
          and any(med(l, v, "sec") is not None for v in ("ckpt", "ckpt-user"))]
    if rw:
        p("## Rewind (`ckpt-mount rewind N --dir DIR`, median)")
        p("")
        p("| case | variant | entries | changed | n | wall s | ms per entry | daemon CPU s "
          "| daemon RSS before MiB | daemon peak RSS MiB | CLI peak RSS MiB |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for l in rw:
            for v in ("ckpt", "ckpt-user"):
                sec = med(l, v, "sec")
                if sec is None:
                    continue
                n = med(l, v, "files")
                ch = med(l, v, "changed")
                d = REWIND_DESC.get(l, f"{int(n) if n else '?'} modified files of 10k")
                fail = f" (FAILED ×{errors[(l, v)]})" if errors.get((l, v)) else ""
                p(f"| {d} | {VNAME[v]} | {int(n) if n else '?'} | {'–' if ch is None else int(ch)} | "
                  f"{len(vals[(l, v, 'sec')])} | {fmt_s(sec)}{fail} | "
                  f"{(sec * 1000 / n) if n else 0:.3f} | {f2(med(l, v, 'cpu'))} | "
                  f"{mib(med(l, v, 'rss_before_kb'))} | {mib(med(l, v, 'rss_kb'))} | "
                  f"{mib(med(l, v, 'cli_rss_kb'))} |")
        p("")
        p("The daemon's peak RSS is its VmHWM during the rewind alone (reset through "
          "/proc/PID/clear_refs just before, so it starts from the RSS before, what the daemon "
          "held after the turn's captures); the CLI's is `/usr/bin/time`'s maximum RSS. "
          "\"changed\": files whose bytes differ from the state rewound to; the others were "
          "captured (opened for writing) but hold their old bytes again, which a rewind skips "
          "after hashing them.")
        p("")

    # -- store
    st = [l for l in labels if med(l, "ckpt", "blob_bytes") is not None]
    if st:
        p("## Store after the turn (read on the underlying folder after unmount; median)")
        p("")
        p("| turn | pre-image bytes (raw) | blob bytes | blobs / raw | `du -sb .ckpt/blobs` | blob files "
          "| journal bytes |")
        p("|---|---|---|---|---|---|---|")
        sdesc = {"rm-rf": "`rm -rf` of the Linux subset (full-tree turn)",
                 "sed-i": "`sed -i` of 1,000 npm files", "firstwrite": "first write of 10k × 100 B files"}
        for l in st:
            raw = med(l, "ckpt", "raw_bytes")
            b = med(l, "ckpt", "blob_bytes")
            p(f"| {sdesc.get(l, l)} | {fmt_bytes(raw)} | {fmt_bytes(b)} | {fmt_ratio(b, raw)} | "
              f"{fmt_bytes(med(l, 'ckpt', 'blob_du'))} | {med(l, 'ckpt', 'blobs') or 0:.0f} | "
              f"{fmt_bytes(med(l, 'ckpt', 'journal_bytes'))} |")
        p("")
        p("Raw is the sum of the sizes of the regular files whose pre-images the turn needed; "
          "identical contents are stored once.")
        p("")

    # -- problems
    p("## Problems seen during the run")
    p("")
    groups = OrderedDict()  # (label, variant, message) -> [reps]
    if a.problems:
        with open(a.problems) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    groups.setdefault((parts[0], parts[1], parts[3]), []).append(parts[2])
    if not groups:
        p("None: every step exited 0 and every check passed.")
    for (label, variant, msg), reps in groups.items():
        p(f"- `{label}` on {VNAME.get(variant, variant)} (rep {', '.join(reps)}): {msg}")
    p("")

    # -- every run
    p("<details><summary>Every run (seconds, in repetition order)</summary>")
    p("")
    p("| step | variant | runs |")
    p("|---|---|---|")
    for l in labels:
        for v in FS_VARIANTS + ["ckpt-kperm", "ckpt-user-base", "git-stash", "shadow-git"]:
            xs = vals.get((l, v, "sec"))
            if xs:
                p(f"| {l} | {VNAME.get(v, v)} | " + " ".join(fmt_s(x) for x in xs) + " |")
    p("")
    p("</details>")
    print("\n".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Small-file helper for bench/run.sh (no dependencies beyond the standard library).

  smallfiles.py create DIR N            create DIR and N files of 100 bytes, unique content each
  smallfiles.py touch DIR OUT [LIMIT]   open(f, 'r+b').write(b'y') once per file (the first LIMIT
                                        files in name order, default all); writes a summary of the
                                        per-file latency (open + write + close, in microseconds)
                                        to OUT as "key value" lines
  smallfiles.py verify DIR N            check that DIR holds exactly the N files `create` made,
                                        with their original content; exit 1 and say how many differ
  smallfiles.py create-tree DIR N       the same N files in subdirectories of 1,000 (DIR/d000/...);
                                        touch, verify and unlink take such a tree as well
  smallfiles.py touch-same DIR OUT K    like touch, but every file except each K-th gets its own
                                        first byte back (its content unchanged, yet the open for
                                        writing makes ckpt-mount capture it); each K-th gets b'y'
  smallfiles.py unlink DIR OUT [LIMIT]  unlink the files (the first LIMIT), per-file latency to OUT
  smallfiles.py busy-write DIR OUT TREE   start `rm -rf TREE`, and while it runs, first-write the
  smallfiles.py busy-unlink DIR OUT TREE  files of DIR (or unlink them) one by one, in name order;
                                        the latencies of those done while rm ran go to OUT, with
                                        busy_s (how long rm took) and rm_rc
  smallfiles.py floor FILE N OUT        N getxattr calls of a missing name (user.ckpt-bench-none)
                                        on an open descriptor of FILE, then N fstat calls on it, in
                                        batches of 1,000: µs per call (median over the batches)
                                        as getxattr_us, fstat_us (and their best batch) to OUT
"""
import errno
import os
import subprocess
import sys
import time

PER_DIR = 1000  # files per subdirectory of a create-tree tree


def content(i: int) -> bytes:
    return b"%0100d" % i  # 100 bytes, unique per file


def name(i: int) -> str:
    return f"f{i:05d}"


def create(d: str, n: int) -> None:
    os.mkdir(d)
    for i in range(n):
        with open(os.path.join(d, name(i)), "wb") as f:
            f.write(content(i))


def tree_path(i: int) -> str:
    return os.path.join(f"d{i // PER_DIR:03d}", name(i))


def create_tree(d: str, n: int) -> None:
    os.mkdir(d)
    for i in range(n):
        if i % PER_DIR == 0:
            os.mkdir(os.path.join(d, f"d{i // PER_DIR:03d}"))
        with open(os.path.join(d, tree_path(i)), "wb") as f:
            f.write(content(i))


def files(d: str) -> list:
    """The files of a create or create-tree folder, relative, in name order."""
    out = []
    for nm in sorted(os.listdir(d)):
        if nm.startswith("d") and os.path.isdir(os.path.join(d, nm)):
            out.extend(os.path.join(nm, x) for x in sorted(os.listdir(os.path.join(d, nm))))
        else:
            out.append(nm)
    return out


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def summary(out: str, lat: list, total: float, extra: dict | None = None) -> None:
    with open(out, "w") as f:
        f.write(f"n {len(lat)}\n")
        if lat:
            f.write(f"median_us {pct(lat, 50):.2f}\n")
            f.write(f"p90_us {pct(lat, 90):.2f}\n")
            f.write(f"p99_us {pct(lat, 99):.2f}\n")
            f.write(f"mean_us {sum(lat) / len(lat):.2f}\n")
        f.write(f"total_s {total:.6f}\n")
        for k, v in (extra or {}).items():
            f.write(f"{k} {v}\n")


def touch(d: str, out: str, limit: int | None, same_except: int = 0) -> None:
    names = files(d)
    if limit is not None:
        names = names[:limit]
    lat = []
    t_start = time.perf_counter()
    for k, nm in enumerate(names):
        p = os.path.join(d, nm)
        # content() starts with b"0": writing it back leaves the file as it was
        byte = b"0" if same_except and k % same_except != 0 else b"y"
        t0 = time.perf_counter_ns()
        with open(p, "r+b") as f:
            f.write(byte)
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    summary(out, lat, time.perf_counter() - t_start)


def unlink(d: str, out: str, limit: int | None) -> None:
    names = files(d)
    if limit is not None:
        names = names[:limit]
    lat = []
    t_start = time.perf_counter()
    for nm in names:
        p = os.path.join(d, nm)
        t0 = time.perf_counter_ns()
        os.unlink(p)
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    summary(out, lat, time.perf_counter() - t_start)


def busy(op: str, d: str, out: str, tree: str) -> int:
    """First writes (op "write") or unlinks (op "unlink") of the files of d while `rm -rf tree`
    runs; only the operations that started before rm ended are kept."""
    names = files(d)
    lat = []
    rm = subprocess.Popen(["rm", "-rf", "--", tree])
    t_start = time.perf_counter()
    for nm in names:
        if rm.poll() is not None:
            break
        p = os.path.join(d, nm)
        t0 = time.perf_counter_ns()
        if op == "write":
            with open(p, "r+b") as f:
                f.write(b"y")
        else:
            os.unlink(p)
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    total = time.perf_counter() - t_start
    rc = rm.wait()
    busy_s = time.perf_counter() - t_start
    summary(out, lat, total, {"busy_s": f"{busy_s:.6f}", "rm_rc": rc})
    if rc != 0:
        print(f"busy-{op}: rm -rf {tree} exited {rc}", file=sys.stderr)
        return 1
    return 0


def floor(path: str, n: int, out: str) -> None:
    """The cost of one request the kernel always sends: a getxattr of a name the file does not
    have (FUSE caches no xattrs), and fstat (a GETATTR when the attributes are not cached)."""
    batch = 1000
    fd = os.open(path, os.O_RDONLY)
    res = {}
    try:
        for what in ("getxattr", "fstat"):
            per_call = []
            for _ in range(max(1, n // batch)):
                t0 = time.perf_counter_ns()
                for _ in range(batch):
                    if what == "fstat":
                        os.fstat(fd)
                        continue
                    try:
                        os.getxattr(fd, "user.ckpt-bench-none")
                    except OSError as e:
                        if e.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
                            raise
                per_call.append((time.perf_counter_ns() - t0) / 1000.0 / batch)
            res[f"{what}_us"] = f"{pct(per_call, 50):.3f}"
            res[f"{what}_best_us"] = f"{min(per_call):.3f}"
    finally:
        os.close(fd)
    with open(out, "w") as f:
        for k, v in res.items():
            f.write(f"{k} {v}\n")


def verify(d: str, n: int) -> int:
    bad = 0
    tree = any(nm.startswith("d") for nm in os.listdir(d))
    path = tree_path if tree else name
    present = set(files(d))
    expected = {path(i) for i in range(n)}
    bad += len(present ^ expected)
    for i in range(n):
        nm = path(i)
        if nm not in present:
            continue
        with open(os.path.join(d, nm), "rb") as f:
            if f.read() != content(i):
                bad += 1
    if bad:
        print(f"verify {d}: {bad} of {n} files differ from their original content", file=sys.stderr)
        return 1
    return 0


def main(argv):
    cmd, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if cmd == "create" and len(args) == 2:
        create(args[0], int(args[1]))
    elif cmd == "create-tree" and len(args) == 2:
        create_tree(args[0], int(args[1]))
    elif cmd == "touch" and len(args) in (2, 3):
        touch(args[0], args[1], int(args[2]) if len(args) > 2 else None)
    elif cmd == "touch-same" and len(args) == 3:
        touch(args[0], args[1], None, int(args[2]))
    elif cmd == "unlink" and len(args) in (2, 3):
        unlink(args[0], args[1], int(args[2]) if len(args) > 2 else None)
    elif cmd in ("busy-write", "busy-unlink") and len(args) == 3:
        return busy(cmd[len("busy-"):], args[0], args[1], args[2])
    elif cmd == "floor" and len(args) == 3:
        floor(args[0], int(args[1]), args[2])
    elif cmd == "verify" and len(args) == 2:
        return verify(args[0], int(args[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

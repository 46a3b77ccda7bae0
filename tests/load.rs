//! Load: parallel writers across turn switches, a 100,000-file tree, a 2 GiB file. No deadlock
//! (a watchdog aborts a wedged run with the daemon's stacks), no descriptor exhaustion, memory
//! bounded by the daemon's peak RSS, and every rewind exact.
//!
//! `CKPT_STRESS_SECS` sets how long the writers run (default 60). The 100,000-file and the
//! 2 GiB tests are long: they run only with `CKPT_LONG=1` (`.ci/run` sets it) and otherwise
//! print `skipped (long): set CKPT_LONG=1 …` on stderr.

mod common;
use common::{
    Mounted, Node, Tmpfs, assert_same_tree, bin, daemon_pid, long_tests_run, require_fuse, tree,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// A `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("daemon status")
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} for pid {pid}"))
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The daemon's real store (the mount hides it), reached through its root descriptor.
fn raw_store(pid: u32, dir: &Path) -> PathBuf {
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("daemon fds") {
        let p = e.expect("fd").path();
        if std::fs::read_link(&p).ok().as_deref() == Some(dir) && p.join(".ckpt/VERSION").is_file()
        {
            return p.join(".ckpt");
        }
    }
    panic!("no root descriptor of {} in the daemon", dir.display());
}

/// Aborts the whole test process (after printing what the daemon's threads are blocked in and
/// detaching the mount) unless disarmed within `limit`: a deadlock must fail, not hang.
struct Watchdog {
    done: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    fn arm(what: &'static str, dir: PathBuf, limit: Duration) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if rx.recv_timeout(limit) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            // Straight to the descriptor: the test harness's capture of eprintln! output
            // would be lost with the process.
            let mut err = std::io::stderr();
            let _ = writeln!(
                err,
                "WATCHDOG: {what} did not finish within {limit:?}: deadlock? daemon threads:"
            );
            let pid = Command::new(bin())
                .args(["status", "--json", "--dir"])
                .arg(&dir)
                .output()
                .ok()
                .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                .and_then(|v| v["pid"].as_u64());
            if let Some(pid) = pid
                && let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task"))
            {
                for t in tasks.flatten() {
                    let p = t.path();
                    let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
                    let wchan = std::fs::read_to_string(p.join("wchan")).unwrap_or_default();
                    let stack = std::fs::read_to_string(p.join("stack")).unwrap_or_default();
                    let _ = writeln!(
                        err,
                        "--- {} {} wchan={wchan}\n{stack}",
                        p.display(),
                        comm.trim()
                    );
                }
            }
            // Detach the mount so nothing is left wedged, then fail the whole run (a panic
            // here would only end this thread).
            let _ = Command::new("umount").arg("-l").arg(&dir).status();
            let _ = writeln!(err, "WATCHDOG: {what} wedged; aborting");
            std::process::abort();
        });
        Self { done: tx }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.done.send(());
    }
}

/// Samples the daemon's descriptor count and peak RSS until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    max_fds: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max_fds = Arc::new(AtomicU64::new(0));
        let (s, m) = (stop.clone(), max_fds.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                m.fetch_max(fd_count(pid) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            stop,
            max_fds,
            thread: Some(thread),
        }
    }

    fn max_fds(&self) -> u64 {
        self.max_fds.load(Ordering::Relaxed)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn stress_secs() -> u64 {
    std::env::var("CKPT_STRESS_SECS")
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .expect("CKPT_STRESS_SECS is a number of seconds")
        })
        .unwrap_or(60)
}

/// A tiny deterministic generator per writer.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Writers park here between operations while the main thread switches turns.
struct Control {
    pause: AtomicBool,
    stop: AtomicBool,
    barrier: Barrier,
    errors: Mutex<Vec<String>>,
    ops: AtomicU64,
    /// Varies the writers' choices from one run of them to the next.
    seed: u64,
}

const WRITERS: usize = 8;
const SHARED: u64 = 12;

/// One `make -j`-like writer: creates, overwrites and appends, writes a temp file and renames
/// it over its target, in its own directory and in a shared one.
/// Returns what each path of its own directory must hold now (`None`: removed).
fn writer(dir: PathBuf, id: usize, ctl: Arc<Control>) -> BTreeMap<PathBuf, Option<String>> {
    let mut rng = Lcg(0x5eed ^ (id as u64) << 32 ^ ctl.seed);
    let mut expect = BTreeMap::new();
    let own = dir.join(format!("w{id}"));
    let shared = dir.join("shared");
    let mut n: u64 = 0;
    let mut own_files: Vec<PathBuf> = Vec::new();
    loop {
        if ctl.pause.load(Ordering::Acquire) {
            ctl.barrier.wait();
            ctl.barrier.wait();
        }
        if ctl.stop.load(Ordering::Acquire) {
            return expect;
        }
        n += 1;
        let body = format!(
            "writer {id} op {n} {}\n",
            "x".repeat(rng.below(400) as usize)
        );
        let kind = rng.below(12);
        let r: std::io::Result<()> = match kind {
            0 | 1 => {
                // A new object file in its own directory; old ones are cleaned.
                let p = own.join(format!("o{n}.o"));
                let r = std::fs::write(&p, &body);
                expect.insert(p.clone(), Some(body.clone()));
                own_files.push(p);
                if own_files.len() > 24 {
                    let old = own_files.remove(rng.below(own_files.len() as u64) as usize);
                    expect.insert(old.clone(), None);
                    r.and_then(|()| std::fs::remove_file(old))
                } else {
                    r
                }
            }
            2 | 3 => std::fs::write(shared.join(format!("s{}", rng.below(SHARED))), &body),
            4 | 5 => {
                let p = shared.join(format!("log{}", rng.below(4)));
                let big = std::fs::metadata(&p).is_ok_and(|m| m.len() > 4096);
                if big {
                    std::fs::write(&p, &body)
                } else {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&p)
                        .and_then(|mut f| f.write_all(body.as_bytes()))
                }
            }
            6..=8 => {
                // Write a temp file and rename it over the target, as compilers and editors do.
                let tmp = shared.join(format!(".tmp.{id}.{n}"));
                std::fs::write(&tmp, &body).and_then(|()| {
                    std::fs::rename(&tmp, shared.join(format!("t{}", rng.below(SHARED))))
                })
            }
            10 | 11 => {
                // Read what others write and rename over, as a compiler reads headers; a
                // target not made yet is the only acceptable failure.
                let p = if kind == 10 {
                    shared.join(format!("t{}", rng.below(SHARED)))
                } else {
                    shared.join(format!("s{}", rng.below(SHARED)))
                };
                match std::fs::read(&p) {
                    Ok(b) if b.is_empty() || b.ends_with(b"\n") => Ok(()),
                    // s* are rewritten in place (truncate, then write): a reader may catch one
                    // between the two, empty or partly written, as on any filesystem.
                    Ok(_) if kind == 11 => Ok(()),
                    Ok(b) => Err(std::io::Error::other(format!(
                        "{} is torn: {} bytes without their newline",
                        p.display(),
                        b.len()
                    ))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && kind == 10 => Ok(()),
                    Err(e) => Err(e),
                }
            }
            _ => {
                // A directory of its own made and removed.
                let d = own.join(format!("sub{}", rng.below(3)));
                if d.exists() {
                    expect.insert(d.join("inner/f"), None);
                    std::fs::remove_dir_all(&d)
                } else {
                    expect.insert(d.join("inner/f"), Some(body.clone()));
                    std::fs::create_dir_all(d.join("inner"))
                        .and_then(|()| std::fs::write(d.join("inner/f"), &body))
                }
            }
        };
        if let Err(e) = r {
            ctl.errors
                .lock()
                .expect("errors")
                .push(format!("writer {id} op {n} (kind {kind}): {e}"));
        }
        ctl.ops.fetch_add(1, Ordering::Relaxed);
    }
}

/// Parks every writer between two operations; `f` runs while they are parked.
fn paused<T>(ctl: &Control, f: impl FnOnce() -> T) -> T {
    ctl.pause.store(true, Ordering::Release);
    ctl.barrier.wait();
    let r = f();
    ctl.pause.store(false, Ordering::Release);
    ctl.barrier.wait();
    r
}

#[test]
fn parallel_writers_across_turn_switches_and_an_exact_rewind() {
    if !require_fuse() {
        return;
    }
    let secs = stress_secs();
    let m = Mounted::with(|d| {
        std::fs::create_dir(d.join("shared")).expect("mkdir shared");
        for i in 0..SHARED {
            std::fs::write(d.join(format!("shared/s{i}")), format!("seed {i}\n")).expect("write");
        }
        for w in 0..WRITERS {
            std::fs::create_dir(d.join(format!("w{w}"))).expect("mkdir writer dir");
        }
        std::fs::write(d.join("Makefile"), "all:\n\ttrue\n").expect("write");
    });
    let _watchdog = Watchdog::arm(
        "parallel writers",
        m.dir.clone(),
        Duration::from_secs(secs * 4 + 300),
    );
    let mut rng = Lcg(42);
    let first = stress(&m, secs, 1, &mut rng);
    assert!(!first.is_empty(), "no snapshot was taken");
    // The newest kept turn: exact. Then work goes on from there (numbering the turns after it
    // again), and a rewind to the newest start of that work is exact too.
    let (t1, snap1) = first.last().expect("a snapshot");
    rewind_exactly(&m, *t1, snap1);
    let second = stress(&m, (secs / 6).max(5), *t1, &mut rng);
    let (t2, snap2) = second.last().expect("a snapshot after the rewind");
    rewind_exactly(&m, *t2, snap2);
    // Back to the oldest kept start of the first run, then undo that: the state before it.
    let before_undo = tree(&m.dir, false);
    let (t0, snap0) = &first[0];
    rewind_exactly(&m, *t0, snap0);
    let o = m.cli(&["rewind", "--undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_same_tree(&before_undo, &tree(&m.dir, false));
    let o = m.cli(&["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

fn rewind_exactly(m: &Mounted, t: u64, snap: &BTreeMap<String, Node>) {
    let out = m.rewind(t);
    eprintln!(
        "load: rewound to turn {t}: {}",
        out.lines().last().unwrap_or("")
    );
    assert_same_tree(snap, &tree(&m.dir, false));
}

/// Runs the writers for `secs`, switching turns (numbered from `turn + 1`) every ~100 ms, a
/// third of the time with the writers parked and a snapshot of the new turn's start taken.
/// Returns a few of those snapshots, oldest first; fails on any writer error.
fn stress(
    m: &Mounted,
    secs: u64,
    mut turn: u64,
    rng: &mut Lcg,
) -> Vec<(u64, BTreeMap<String, Node>)> {
    let ctl = Arc::new(Control {
        pause: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        barrier: Barrier::new(WRITERS + 1),
        errors: Mutex::new(Vec::new()),
        ops: AtomicU64::new(0),
        seed: rng.below(1 << 30) << 8,
    });
    let threads: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (dir, ctl) = (m.dir.clone(), ctl.clone());
            std::thread::spawn(move || writer(dir, id, ctl))
        })
        .collect();
    let mut kept: Vec<(u64, BTreeMap<String, Node>)> = Vec::new();
    let first_turn = turn + 1;
    let mut paused_switches = 0;
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        turn += 1;
        if rng.below(3) == 0 {
            // A consistent start: nothing runs between the turn switch and the snapshot.
            let snap = paused(&ctl, || {
                m.turn(turn);
                tree(&m.dir, false)
            });
            paused_switches += 1;
            if kept.len() < 6 {
                kept.push((turn, snap));
            } else if rng.below(paused_switches) < 6 {
                kept[rng.below(6) as usize] = (turn, snap);
            }
        } else {
            // While the writers run: the switch waits for mutations in flight.
            m.turn(turn);
        }
    }
    paused(&ctl, || ctl.stop.store(true, Ordering::Release));
    let mut lost = Vec::new();
    let mut checked = 0;
    for t in threads {
        for (path, want) in t.join().expect("writer panicked") {
            let got = std::fs::read_to_string(&path).ok();
            checked += 1;
            if got != want {
                lost.push(format!("{}: {got:?}, written {want:?}", path.display()));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {checked} paths the writers own differ from what they last wrote: {:#?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    let ops = ctl.ops.load(Ordering::Relaxed);
    let pid = daemon_pid(&m.dir);
    let log =
        std::fs::read_to_string(raw_store(pid, &m.dir).join("daemon.log")).unwrap_or_default();
    eprintln!(
        "load: {WRITERS} writers, {ops} operations, turns {first_turn}..={turn} ({paused_switches} with a snapshot) in {secs} s; {checked} paths checked; {} warnings in the daemon's log",
        log.lines().filter(|l| l.contains("WARN")).count()
    );
    // Nothing the writers did failed inside the daemon either (a retry by the kernel hides a
    // failure from them, not from the log).
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ckpt::fuse") && l.contains("failed"))
        .collect();
    assert!(
        failed.is_empty(),
        "{} requests failed in the daemon: {:#?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    let errors = ctl.errors.lock().expect("errors").clone();
    if !errors.is_empty() {
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
        panic!(
            "{} writer operations failed, first: {:#?}\ndaemon warnings (first 30 of {}):\n{}",
            errors.len(),
            &errors[..errors.len().min(10)],
            warnings.len(),
            warnings[..warnings.len().min(30)].join("\n")
        );
    }
    kept.sort_by_key(|k| k.0);
    kept
}

const TOP: usize = 100;
const SUB: usize = 10;
const PER_DIR: usize = 100;
/// The daemon's directory cache, and the blob store's shard directories it keeps open.
const DIR_CACHE: u64 = 1024;
const SHARDS: u64 = 256;

fn small_body(d: usize, s: usize, f: usize) -> String {
    format!("dir {d} sub {s} file {f}\n")
}

fn small_path(d: usize, s: usize, f: usize) -> String {
    format!("d{d:03}/s{s}/f{f:03}")
}

#[test]
fn a_hundred_thousand_files_walk_remove_and_rewind_within_bounded_descriptors_and_memory() {
    if !long_tests_run(
        "load::a_hundred_thousand_files_walk_remove_and_rewind_within_bounded_descriptors_and_memory",
    ) || !require_fuse()
    {
        return;
    }
    // 100 × 10 directories of 100 files: more directories than the daemon's cache holds. On a
    // tmpfs: making and removing 100,000 files on a disk can take minutes of the test's time.
    let mut fs_guard = None;
    let m = Mounted::with(|root| {
        fs_guard = Some(Tmpfs::mount(root, "size=1g,nr_inodes=400k"));
        for d in 0..TOP {
            for s in 0..SUB {
                std::fs::create_dir_all(root.join(format!("d{d:03}/s{s}"))).expect("mkdir");
                for f in 0..PER_DIR {
                    std::fs::write(root.join(small_path(d, s, f)), small_body(d, s, f))
                        .expect("write");
                }
            }
        }
    });
    assert!(
        fs_guard.is_some(),
        "declared before the mount, so it is dropped after it"
    );
    let total = TOP * SUB * PER_DIR;
    let _watchdog = Watchdog::arm("100k files", m.dir.clone(), Duration::from_secs(900));
    let pid = daemon_pid(&m.dir);
    let sampler = Sampler::start(pid);
    let mut phases = Vec::new();
    let mut clock = Instant::now();
    let mut lap = |what: &str| {
        phases.push(format!("{what} {:.1?}", clock.elapsed()));
        clock = Instant::now();
    };

    // Walk and stat everything, read a sample.
    let mut files = 0;
    let mut read = 0;
    for d in 0..TOP {
        for s in 0..SUB {
            let dir = m.dir.join(format!("d{d:03}/s{s}"));
            for e in std::fs::read_dir(&dir).expect("read_dir") {
                let e = e.expect("entry");
                let md = std::fs::symlink_metadata(e.path()).expect("stat");
                assert!(md.is_file());
                files += 1;
            }
            for f in ((d + s) % 37..PER_DIR).step_by(37) {
                let body = std::fs::read_to_string(m.path(&small_path(d, s, f))).expect("read");
                assert_eq!(body, small_body(d, s, f));
                read += 1;
            }
        }
    }
    assert_eq!(files, total);
    let out = m.sh("find . -type f | wc -l");
    assert_eq!(out.trim(), total.to_string());
    lap("walk");

    // Remove a tenth in a turn, and rewind it.
    m.turn(2);
    let part: Vec<usize> = (0..10).map(|d| d * 10).collect();
    let names: Vec<String> = part.iter().map(|d| format!("d{d:03}")).collect();
    let o = m.sh_output(&format!("rm -rf {}", names.join(" ")));
    assert!(
        o.status.success(),
        "rm -rf failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(names.iter().all(|p| !m.path(p).exists()));
    lap("rm -rf");
    let out = m.rewind(2);
    let removed = part.len() * (1 + SUB * (1 + PER_DIR));
    assert!(
        out.lines()
            .last()
            .unwrap_or("")
            .contains(&format!("{removed} restored")),
        "{}",
        out.lines().last().unwrap_or("")
    );
    lap("rewind");
    for &d in &part {
        for s in 0..SUB {
            let n = std::fs::read_dir(m.path(&format!("d{d:03}/s{s}")))
                .expect("restored dir")
                .count();
            assert_eq!(n, PER_DIR, "d{d:03}/s{s}");
            for f in 0..PER_DIR {
                let body = std::fs::read_to_string(m.path(&small_path(d, s, f))).expect("read");
                assert_eq!(body, small_body(d, s, f));
            }
        }
    }
    let out = m.sh("find . -type f | wc -l");
    assert_eq!(out.trim(), total.to_string());
    lap("check");

    let max_fds = sampler.max_fds();
    drop(sampler);
    let hwm = status_kib(pid, "VmHWM:");
    eprintln!(
        "load: 100k files: {files} stat-ed, {read} read, {removed} removed and restored; daemon peak RSS {} MiB, at most {max_fds} descriptors; {}",
        hwm / 1024,
        phases.join(", ")
    );
    let log =
        std::fs::read_to_string(raw_store(pid, &m.dir).join("daemon.log")).unwrap_or_default();
    assert!(
        !log.contains("Too many open files"),
        "the daemon ran out of descriptors"
    );
    // The directory cache, the blob shards, and a little for the store, FUSE and handles.
    assert!(
        max_fds <= DIR_CACHE + SHARDS + 128,
        "the daemon held {max_fds} descriptors"
    );
    assert!(hwm < 400 * 1024, "daemon peak RSS {} MiB", hwm / 1024);
}

fn sha256_file(p: &Path) -> String {
    let mut f = std::fs::File::open(p).expect("open for hashing");
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = f.read(&mut buf).expect("read for hashing");
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

const GIB: u64 = 1 << 30;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

/// The capture records of `path` in the journal of the store at `store`.
fn captures_of(store: &Path, path: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(store.join("journal.jsonl"))
        .expect("read journal")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|l| l["op"] == "capture" && l["path"] == path)
        .collect()
}

#[test]
fn a_two_gib_file_is_skipped_over_max_blob_and_streamed_under_it() {
    if !long_tests_run("load::a_two_gib_file_is_skipped_over_max_blob_and_streamed_under_it")
        || !require_fuse()
    {
        return;
    }
    let mut m = Mounted::with(|d| {
        let f = std::fs::File::create(d.join("big")).expect("create big");
        f.set_len(2 * GIB).expect("truncate -s 2G");
        for (i, off) in [0, 512 << 20, GIB + 3, 2 * GIB - (1 << 20)]
            .iter()
            .enumerate()
        {
            f.write_all_at(&pattern(i as u8, 1 << 20), *off)
                .expect("write data");
        }
        std::fs::write(d.join("small"), "small v1\n").expect("write small");
        std::fs::create_dir(d.join("dir")).expect("mkdir");
        std::fs::write(d.join("dir/other"), "other v1\n").expect("write other");
    });
    let _watchdog = Watchdog::arm("2 GiB file", m.dir.clone(), Duration::from_secs(1200));
    let original = sha256_file(&m.path("big"));
    let small_tree = |m: &Mounted| {
        let mut t = BTreeMap::new();
        for p in ["small", "dir/other", "new"] {
            t.insert(p, std::fs::read(m.path(p)).ok());
        }
        t
    };

    // Over --max-blob (1G by default): recorded as skipped, reported as FAILED, the rest back.
    m.turn(2);
    let smalls = small_tree(&m);
    let edit = |m: &Mounted, off: u64, what: &[u8]| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(m.path("big"))
            .expect("open big for writing in place");
        f.write_all_at(what, off).expect("edit big");
    };
    edit(&m, 100 << 20, b"EDITED IN TURN 2");
    m.sh("echo small v2 > small; rm dir/other; echo new > new");
    let pid = daemon_pid(&m.dir);
    let caps = captures_of(&raw_store(pid, &m.dir), "big");
    assert_eq!(caps.len(), 1, "{caps:?}");
    assert_eq!(caps[0]["pre"]["kind"], "skipped", "{caps:?}");
    assert_eq!(caps[0]["pre"]["size"], 2 * GIB);
    assert!(
        caps[0]["pre"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("max-blob")),
        "{caps:?}"
    );
    let edited = sha256_file(&m.path("big"));
    assert_ne!(edited, original);
    let o = m.cli(&["rewind", "2"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAILED   big:") && l.contains("max-blob")),
        "{out}"
    );
    assert!(!out.contains("unfinished"), "{out}");
    let caps = captures_of(&raw_store(pid, &m.dir), "big");
    assert_eq!(
        caps.len(),
        1,
        "the rewind left big alone, so it saved nothing of it for an undo: {caps:?}"
    );
    assert_eq!(small_tree(&m), smalls, "everything else is restored");
    assert_eq!(sha256_file(&m.path("big")), edited, "big is left as it is");
    let hwm = status_kib(pid, "VmHWM:");
    eprintln!(
        "load: 2 GiB over --max-blob: skipped; daemon peak RSS {} MiB",
        hwm / 1024
    );
    m.unmount();

    // Under --max-blob 3G: the capture streams, and the rewind gives back every byte.
    m.remount_with(&["--max-blob", "3G"]);
    let pid = daemon_pid(&m.dir);
    let current: u64 = std::fs::read_to_string(m.path(".ckpt/turn"))
        .expect("turn")
        .trim()
        .parse()
        .expect("turn number");
    m.turn(current + 1);
    let smalls = small_tree(&m);
    let start = Instant::now();
    edit(&m, GIB + 5, b"EDITED UNDER 3G");
    edit(&m, 3, b"AND AGAIN");
    let capture_time = start.elapsed();
    m.sh("echo small v3 > small; rm dir/other; echo newer > new");
    let caps = captures_of(&raw_store(pid, &m.dir), "big");
    let last = caps.last().expect("a capture of big");
    assert_eq!(last["pre"]["kind"], "file", "{last}");
    assert_eq!(last["pre"]["size"], 2 * GIB);
    let after_capture = status_kib(pid, "VmHWM:");
    assert_ne!(sha256_file(&m.path("big")), edited);
    m.rewind(current + 1);
    assert_eq!(sha256_file(&m.path("big")), edited, "big is exactly back");
    assert_eq!(small_tree(&m), smalls);
    let hwm = status_kib(pid, "VmHWM:");
    eprintln!(
        "load: 2 GiB under --max-blob 3G: captured in {capture_time:?}; daemon peak RSS {} MiB after the capture, {} MiB after the rewind",
        after_capture / 1024,
        hwm / 1024
    );
    assert!(hwm < 300 * 1024, "daemon peak RSS {} MiB", hwm / 1024);
    let o = m.cli(&["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

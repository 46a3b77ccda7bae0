//! Faults: a full disk, a killed daemon. The store must stay consistent and no capture may be
//! silently lost.

mod common;
use common::{
    Mounted, Tmpfs, assert_same_tree, daemon_pid, output_text, raw_folder, require_fuse,
    store_bytes, tree,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

#[test]
fn a_capture_that_cannot_be_stored_fails_the_mutation_with_enospc() {
    if !require_fuse() {
        return;
    }
    let mut fs_guard = None;
    let big: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let m = Mounted::with(|d| {
        fs_guard = Some(Tmpfs::mount(d, "size=12m"));
        std::fs::write(d.join("big"), &big).expect("write big");
        std::fs::write(d.join("small"), "small\n").expect("write small");
    });
    assert!(
        fs_guard.is_some(),
        "declared before the mount, so it is dropped after it"
    );
    m.turn(2);
    let before = tree(&m.dir, false);
    // Fill the disk through the mount (the filler's own capture is tiny and fits).
    let _ = m.sh_output("dd if=/dev/zero of=filler bs=64k 2>/dev/null");
    let o = m.sh_output(": > big");
    assert!(
        !o.status.success(),
        "truncating big must fail while its pre-image cannot be stored"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("No space left on device"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read(m.path("big")).expect("read big"),
        big,
        "big must be unchanged"
    );
    // The daemon's log names the path that failed, not a node id.
    let log = output_text(&m.cli(&["status", "--log"]));
    assert!(
        log.contains("\"big\" failed: No space left on device"),
        "{log}"
    );
    assert!(!log.contains("node="), "{log}");
    let fsck = m.cli(&["fsck"]);
    assert!(
        fsck.status.success(),
        "store inconsistent: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    // Space freed: work resumes, and the history is whole.
    m.sh("rm filler");
    m.sh(": > big; echo changed > small");
    assert_eq!(std::fs::metadata(m.path("big")).expect("stat").len(), 0);
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn a_turn_does_not_begin_while_a_file_held_open_for_writing_cannot_be_captured() {
    if !require_fuse() {
        return;
    }
    let mut fs_guard = None;
    let pattern = |salt: u32| -> Vec<u8> {
        (0..3u32 << 20)
            .map(|i| (i.wrapping_add(salt).wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    };
    let m = Mounted::with(|d| {
        fs_guard = Some(Tmpfs::mount(d, "size=16m"));
        std::fs::write(d.join("held"), pattern(1)).expect("write held");
    });
    assert!(fs_guard.is_some());
    m.turn(2);
    // Held open for writing across the turn switch, with bytes no blob has yet.
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("held"))
        .expect("open held");
    std::os::unix::fs::FileExt::write_all_at(&held, &pattern(2), 0).expect("rewrite held");
    let _ = m.sh_output("dd if=/dev/zero of=filler bs=64k 2>/dev/null");
    let o = m.sh_output("echo 3 > .ckpt/turn");
    assert!(
        !o.status.success(),
        "the new turn could not capture the held file, so it must not begin"
    );
    let turn = std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn");
    assert_eq!(turn.trim(), "2", "the turn did not change");
    m.sh("rm filler");
    m.turn(3);
    let turn = std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn");
    assert_eq!(turn.trim(), "3");
    // What the held file was when turn 3 began comes back after more writes through it.
    std::os::unix::fs::FileExt::write_all_at(&held, b"later", 0).expect("write");
    drop(held);
    m.rewind(3);
    assert_eq!(std::fs::read(m.path("held")).expect("read"), pattern(2));
}

/// Every byte of the store below the folder `raw` but the daemon's log (not history).
fn store_of(raw: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut s = store_bytes(raw);
    s.remove("daemon.log");
    s
}

/// The stderr of `o`, which must have exited 1.
fn failed_with(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{}", output_text(o));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The turn that filled the disk: `status` says the disk is full, and what to do. Its rewind
/// must save what it deletes for the undo, and there is no room for that. The dry run says so
/// and exits 1; the run is refused before it changes anything, in one line with the numbers,
/// the largest files the turn created and what to do, and leaves no byte in the store, every
/// time; once a file is deleted, the rewind runs and is exact, and so is its undo.
#[test]
fn a_rewind_without_room_on_a_full_disk_is_refused_whole_and_says_what_to_free() {
    if !require_fuse() {
        return;
    }
    let mut fs_guard = None;
    let big: Vec<u8> = (0..5u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let m = Mounted::with(|d| {
        fs_guard = Some(Tmpfs::mount(d, "size=16m"));
        std::fs::write(d.join("keep"), "as it was\n").expect("write keep");
        std::fs::create_dir(d.join("src")).expect("mkdir src");
        std::fs::write(d.join("src/a.rs"), "fn a() {}\n").expect("write a.rs");
    });
    assert!(fs_guard.is_some());
    m.turn(2);
    let at_two = tree(&m.dir, false);
    m.sh("echo changed > keep && echo 'fn b() {}' > src/b.rs && rm src/a.rs");
    std::fs::write(m.path("big"), &big).expect("write big");
    // Fill the disk through the mount (the filler's own capture is tiny and fits).
    let _ = m.sh_output("dd if=/dev/zero of=filler bs=64k 2>/dev/null");
    let full = tree(&m.dir, false);
    let status = m.cli(&["status"]);
    let text = output_text(&status);
    assert!(status.status.success(), "{text}");
    let line: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the disk holding the store is"))
        .collect();
    assert_eq!(line.len(), 1, "one line about the disk: {text}");
    for want in [" full (", " free of 16.0 MiB)", "prune --dry-run"] {
        assert!(line[0].contains(want), "{want:?} not in {text}");
    }
    assert!(!text.contains("the store holds"), "no size warning: {text}");
    let raw = raw_folder(&m);
    let store = store_of(&raw);
    let dry = failed_with(&m.cli(&["rewind", "2", "--dry-run"]));
    for want in [
        "the run would be refused before changing anything: not enough space on the disk of the folder and its store: the rewind needs ",
        " to save what it overwrites and deletes, for its undo",
        "the largest files the rewound turns created: filler (",
        "), big (5.0 MiB); free at least ",
        "ckpt-mount prune --dry-run",
    ] {
        assert!(dry.contains(want), "{want:?} not in {dry}");
    }
    for attempt in 0..2 {
        let refused = failed_with(&m.cli(&["rewind", "2"]));
        assert_eq!(refused.lines().count(), 1, "one line: {refused}");
        for want in [
            "rewind refused before changing anything: not enough space on the disk of the folder and its store: the rewind needs ",
            " is free; the largest files the rewound turns created: filler (",
            "big (5.0 MiB)",
            "ckpt-mount prune --dry-run",
        ] {
            assert!(refused.contains(want), "{want:?} not in {refused}");
        }
        assert_same_tree(&full, &tree(&m.dir, false));
        assert_eq!(
            store,
            store_of(&raw),
            "attempt {attempt} left bytes in the store"
        );
    }
    // A partial rewind and its dry run are refused the same way.
    let only_big = |args: &[&str]| {
        Command::new(common::bin())
            .args(args)
            .arg("--dir")
            .arg(&m.dir)
            .args(["--", "big"])
            .output()
            .expect("run rewind -- big")
    };
    let partial = failed_with(&only_big(&["rewind", "2", "--dry-run"]));
    assert!(partial.contains("big (5.0 MiB)"), "{partial}");
    let partial = failed_with(&only_big(&["rewind", "2"]));
    assert!(partial.contains("rewind refused before changing anything: not enough space"));
    assert_same_tree(&full, &tree(&m.dir, false));
    assert_eq!(store, store_of(&raw));
    // Freed: the rewind runs, and is exact both ways.
    m.sh("rm filler");
    let freed = tree(&m.dir, false);
    let dry = m.cli(&["rewind", "2", "--dry-run"]);
    assert!(dry.status.success(), "{}", output_text(&dry));
    m.rewind(2);
    assert_same_tree(&at_two, &tree(&m.dir, false));
    let undo = m.cli(&["rewind", "--undo"]);
    assert!(undo.status.success(), "{}", output_text(&undo));
    assert_same_tree(&freed, &tree(&m.dir, false));
    let fsck = m.cli(&["fsck"]);
    assert!(fsck.status.success(), "{}", output_text(&fsck));
}

/// Bytes free in the filesystem of `dir` (`stat -f`: available blocks times their size).
fn free_bytes(dir: &Path) -> u64 {
    let o = Command::new("stat")
        .args(["-f", "-c", "%a %S"])
        .arg(dir)
        .output()
        .expect("run stat -f");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut it = text
        .split_whitespace()
        .map(|n| n.parse::<u64>().expect("a number"));
    it.next().expect("blocks") * it.next().expect("block size")
}

/// A file the rewind deletes whose bytes the store holds already (a rename's capture) takes
/// no room for its save: when counting every file whole does not fit, the files are hashed and
/// the rewind that fits runs.
#[test]
fn a_save_the_store_holds_already_takes_no_room() {
    if !require_fuse() {
        return;
    }
    let mut fs_guard = None;
    let data: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2_246_822_519) >> 9) as u8)
        .collect();
    let m = Mounted::with(|d| {
        fs_guard = Some(Tmpfs::mount(d, "size=16m"));
        std::fs::write(d.join("data"), &data).expect("write data");
    });
    assert!(fs_guard.is_some());
    m.turn(2);
    let at_two = tree(&m.dir, false);
    // The rename captures `data` (its bytes into the store); the rewind deletes `moved` (the
    // same bytes) and writes `data` again.
    m.sh("mv data moved");
    let _ = m.cli(&["status"]); // the staged capture stored
    let free = free_bytes(&m.dir);
    let leave = 5u64 << 20;
    assert!(free > leave, "{free} bytes free");
    // Written under the mount, behind its back: no turn captured it, no rewind touches it.
    let filler = vec![7u8; (free - leave) as usize];
    std::fs::write(raw_folder(&m).join("filler"), filler).expect("write filler");
    let o = m.cli(&["rewind", "2", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let space = &v["space"];
    assert_eq!(space["fits"], true, "{space}");
    assert!(
        space["save_bytes"].as_u64().expect("save_bytes") < 1 << 20,
        "moved counted: {space}"
    );
    m.rewind(2);
    let mut want = at_two;
    let filler = tree(&m.dir, false)
        .remove("filler")
        .expect("the filler stays");
    want.insert("filler".into(), filler);
    assert_same_tree(&want, &tree(&m.dir, false));
}

/// A tiny deterministic generator, so a failing iteration can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn kill9(pid: u32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    for _ in 0..500 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
}

/// One turn of agent-like work; stops at the first error (the daemon was killed).
fn work(dir: &Path, turn: u64, rng: &mut Lcg) -> std::io::Result<()> {
    let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i ^ turn as u32) as u8).collect();
    for step in 0..12 {
        let f = dir.join(format!("f{}", rng.next(6)));
        match rng.next(7) {
            0 => std::fs::write(&f, format!("turn {turn} step {step}\n"))?,
            1 => std::fs::write(dir.join(format!("big{}", rng.next(2))), &big)?,
            2 => {
                let _ = std::fs::remove_file(&f);
            }
            3 => {
                std::fs::create_dir_all(dir.join(format!("d{}/e", rng.next(3))))?;
                std::fs::write(dir.join(format!("d{}/e/x", rng.next(3))), format!("{turn}"))
                    .or_else(|e| {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })?;
            }
            4 => {
                let _ = std::fs::rename(&f, dir.join(format!("f{}", rng.next(6))));
            }
            5 => {
                let d = dir.join(format!("d{}", rng.next(3)));
                if d.exists() {
                    std::fs::remove_dir_all(&d)?;
                }
            }
            _ => {
                use std::io::Write;
                let mut h = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&f)?;
                h.write_all(b"appended\n")?;
            }
        }
    }
    Ok(())
}

#[test]
fn fifty_kill_9s_lose_nothing_that_completed() {
    if !require_fuse() {
        return;
    }
    let iterations: u64 = std::env::var("CKPT_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut m = Mounted::with(|d| {
        for i in 0..6 {
            std::fs::write(d.join(format!("f{i}")), format!("initial {i}\n")).expect("write");
        }
    });
    let dir = m.dir.clone();
    let mut next_turn = 2;
    let mut rng = Lcg(0x5eed);
    for it in 0..iterations {
        // Turns whose start state the worker saw, in order.
        let mut snaps: Vec<(u64, std::collections::BTreeMap<String, common::Node>)> = Vec::new();
        let current: u64 = std::fs::read_to_string(dir.join(".ckpt/turn"))
            .expect("turn")
            .trim()
            .parse()
            .expect("number");
        snaps.push((current, tree(&dir, false)));
        let during_rewind = it % 4 == 3;
        let pid = daemon_pid(&dir);
        if during_rewind {
            // Work a few turns, then kill the daemon while it rewinds.
            for _ in 0..3 {
                std::fs::write(dir.join(".ckpt/turn"), format!("{next_turn}\n")).expect("turn");
                snaps.push((next_turn, tree(&dir, false)));
                work(&dir, next_turn, &mut rng).expect("work");
                next_turn += 1;
            }
            let (target, _) = snaps[rng.next(snaps.len() as u64) as usize].clone();
            let mut rewinder = Command::new(common::bin())
                .args(["rewind", &target.to_string(), "--dir"])
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn rewind");
            std::thread::sleep(std::time::Duration::from_millis(rng.next(40)));
            kill9(pid);
            let _ = rewinder.wait();
        } else {
            let start = next_turn;
            next_turn += 40;
            let mut wrng = Lcg(rng.next(u64::MAX));
            let d2 = dir.clone();
            let worker = std::thread::spawn(move || {
                let mut seen = Vec::new();
                for t in start..start + 40 {
                    if std::fs::write(d2.join(".ckpt/turn"), format!("{t}\n")).is_err() {
                        break;
                    }
                    seen.push((t, tree_or_none(&d2)));
                    if work(&d2, t, &mut wrng).is_err() {
                        break;
                    }
                }
                seen
            });
            std::thread::sleep(std::time::Duration::from_millis(5 + rng.next(150)));
            kill9(pid);
            for (t, snap) in worker.join().expect("worker") {
                if let Some(snap) = snap {
                    snaps.push((t, snap));
                }
            }
        }
        let _ = Command::new("umount").arg("-l").arg(&dir).status();
        let fsck = Command::new(common::bin())
            .args(["fsck", "--dir"])
            .arg(&dir)
            .output()
            .expect("fsck");
        assert!(
            fsck.status.success(),
            "iteration {it}: fsck: {}",
            String::from_utf8_lossy(&fsck.stdout)
        );
        let mount = Command::new(common::bin())
            .arg("mount")
            .arg(&dir)
            .output()
            .expect("mount");
        assert!(
            mount.status.success(),
            "iteration {it}: remount: {}",
            String::from_utf8_lossy(&mount.stderr)
        );
        // Rewind to a turn whose start the worker saw (the interrupted rewind, if any, completes
        // first), and compare.
        let (target, snap) = snaps[rng.next(snaps.len() as u64) as usize].clone();
        let known = m.cli(&["log", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&known.stdout).expect("log json");
        let exists = rows
            .as_array()
            .expect("rows")
            .iter()
            // A turn a rewind retired stays in `log`, marked `rewound_by`: not one to rewind to.
            .any(|r| r["turn"] == target && r["rewound_by"].is_null());
        if !exists {
            // Retired by the interrupted rewind, which completed at remount: its target is then
            // the current turn, checked through the next iteration's first snapshot.
            continue;
        }
        let o = m.cli(&["rewind", &target.to_string()]);
        assert!(
            o.status.success(),
            "iteration {it}: rewind {target}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let now = tree(&dir, false);
        assert_same_tree(&snap, &now);
    }
    m.unmount();
    let fsck = m.cli(&["fsck"]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    m.remount();
}

/// A snapshot, or `None` when the mount died while taking it.
fn tree_or_none(dir: &Path) -> Option<std::collections::BTreeMap<String, common::Node>> {
    std::panic::catch_unwind(|| tree(dir, false)).ok()
}

//! A damaged store, on an unmounted folder with history: each kind of damage is named by
//! `fsck`, and `rewind` either works (a torn last line), refuses before changing anything (a
//! missing or damaged blob, an invalid journal path, an unknown format), or restores what it
//! safely can and stays unfinished (a parent swapped for a symlink) until run again. A store
//! that lost its journal or `VERSION` but kept its blobs, or a symlinked `.ckpt`, journal or
//! `VERSION`, is refused by every command, `mount` included, and changes in nothing, until
//! `fsck --start-over` sets the old files aside; a new store, or one with nothing captured,
//! still opens.

mod common;
use common::{Mounted, Node, assert_same_tree, bin, require_fuse, store_bytes, tree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An unmounted folder with three turns of history, and the tree at the start of turns 2
/// and 3.
struct History {
    m: Mounted,
    at2: BTreeMap<String, Node>,
    at3: BTreeMap<String, Node>,
}

fn history() -> History {
    let mut m = Mounted::with(|d| {
        // Over 64 KiB, so its pre-image is a loose blob file that the tests can damage (small
        // pre-images are packed).
        std::fs::write(d.join("a"), "a v1\n".repeat(20_000)).expect("write a");
        std::fs::write(d.join("b"), "b v1\n").expect("write b");
        std::fs::create_dir_all(d.join("sub/deep")).expect("mkdir sub/deep");
        std::fs::write(d.join("sub/file"), "sub file v1\n").expect("write sub/file");
        std::fs::write(d.join("sub/deep/x"), "x v1\n").expect("write sub/deep/x");
    });
    m.turn(2);
    let at2 = tree(&m.dir, false);
    m.sh("echo a2 > a; rm b; echo c > c; echo sub2 > sub/file");
    m.turn(3);
    let at3 = tree(&m.dir, false);
    m.sh("echo a3 > a; rm -r sub/deep; echo d > d");
    m.unmount();
    History { m, at2, at3 }
}

/// A directory outside the folder with content a rewind that escaped would overwrite.
fn canary() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("ckpt-canary-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::write(d.path().join("file"), "outside\n").expect("write");
    std::fs::write(d.path().join("planted"), "outside planted\n").expect("write");
    std::fs::create_dir(d.path().join("deep")).expect("mkdir");
    std::fs::write(d.path().join("deep/x"), "outside x\n").expect("write");
    d
}

/// Runs `ckpt-mount SUBCOMMAND --dir DIR REST...`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg(args[0])
        .arg("--dir")
        .arg(dir)
        .args(&args[1..])
        .output()
        .expect("run ckpt-mount")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts a refusal: exit 1 and exactly one line on stderr containing each of `words`.
fn assert_refused(o: &Output, words: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert_eq!(err.lines().count(), 1, "one line on stderr: {}", text(o));
    for w in words {
        assert!(err.contains(w), "stderr lacks {w:?}: {}", text(o));
    }
}

fn journal_path(dir: &Path) -> PathBuf {
    dir.join(".ckpt/journal.jsonl")
}

fn journal(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(journal_path(dir))
        .expect("read journal")
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line is JSON"))
        .collect()
}

/// Writes `lines` as the journal, renumbering `seq` from 1 (the history has no rewind
/// records, so nothing refers to a seq).
fn write_journal(dir: &Path, lines: &[serde_json::Value]) {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let mut l = l.clone();
        l["seq"] = serde_json::json!(i + 1);
        out.push_str(&serde_json::to_string(&l).expect("encode"));
        out.push('\n');
    }
    std::fs::write(journal_path(dir), out).expect("write journal");
}

/// The blob id of the pre-image of `path` captured in `turn`.
fn blob_id(dir: &Path, turn: u64, path: &str) -> String {
    let line = journal(dir)
        .into_iter()
        .find(|l| l["op"] == "capture" && l["turn"] == turn && l["path"] == path)
        .unwrap_or_else(|| panic!("no capture of {path} in turn {turn}"));
    line["pre"]["blob"]
        .as_str()
        .expect("a file pre-image")
        .to_string()
}

/// Where a blob is stored.
enum Stored {
    /// Its own file.
    Loose(PathBuf),
    /// In a pack: the index file, its line, the data file and the offset.
    Packed {
        idx: PathBuf,
        line: String,
        data: PathBuf,
        off: u64,
    },
}

fn stored(dir: &Path, id: &str) -> Stored {
    let loose = dir.join(".ckpt/blobs").join(&id[..2]).join(&id[2..]);
    if loose.is_file() {
        return Stored::Loose(loose);
    }
    let packs = dir.join(".ckpt/blobs/packs");
    for e in std::fs::read_dir(&packs).expect("packs") {
        let idx = e.expect("entry").path();
        if idx.extension().is_none_or(|x| x != "idx") {
            continue;
        }
        let text = std::fs::read_to_string(&idx).expect("read idx");
        if let Some(line) = text.lines().find(|l| l.starts_with(id)) {
            let off = line
                .split(' ')
                .nth(1)
                .expect("offset")
                .parse()
                .expect("offset");
            return Stored::Packed {
                data: idx.with_extension("dat"),
                idx,
                line: line.to_string(),
                off,
            };
        }
    }
    panic!("blob {id} is stored nowhere");
}

/// Removes the blob (`missing`) or flips one of its bytes.
fn damage(where_: &Stored, missing: bool) {
    match where_ {
        Stored::Loose(p) if missing => std::fs::remove_file(p).expect("remove blob"),
        Stored::Loose(p) => {
            let mut bytes = std::fs::read(p).expect("read blob");
            bytes[0] ^= 0x20;
            std::fs::write(p, bytes).expect("damage blob");
        }
        Stored::Packed { idx, line, .. } if missing => {
            let text = std::fs::read_to_string(idx).expect("read idx");
            let kept: String = text
                .lines()
                .filter(|l| l != line)
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::write(idx, kept).expect("rewrite idx");
        }
        Stored::Packed { data, off, .. } => {
            let mut bytes = std::fs::read(data).expect("read pack");
            bytes[*off as usize] ^= 0x20;
            std::fs::write(data, bytes).expect("damage pack");
        }
    }
}

#[test]
fn a_torn_last_line_is_a_warning_and_the_rewind_works() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    let mut bytes = std::fs::read(journal_path(&dir)).expect("read journal");
    let whole = bytes.len();
    bytes.extend_from_slice(br#"{"v":1,"seq":999,"time":0,"op":"capt"#);
    std::fs::write(journal_path(&dir), &bytes).expect("tear the journal");

    let o = cli(&dir, &["fsck"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "a torn tail is a warning: {}",
        text(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("warn") && out.contains("journal-torn"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(journal_path(&dir)).expect("read").len(),
        bytes.len(),
        "fsck only reads"
    );

    let o = cli(&dir, &["rewind", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_same_tree(&h.at2, &tree(&dir, false));
    let now = std::fs::read(journal_path(&dir)).expect("read");
    assert_eq!(&now[..whole], &bytes[..whole], "whole lines are kept");
    assert!(now.ends_with(b"\n"), "the torn line was cut off");
    assert!(!String::from_utf8_lossy(&now).contains("\"seq\":999"));
    let o = cli(&dir, &["fsck"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("journal-torn"));
    h.m.remount();
    assert_same_tree(&h.at2, &tree(&dir, false));
}

/// Damages the turn-2 pre-image of `path` (`missing`: removes it, else flips a byte), then
/// checks that fsck names it, that a rewind needing it refuses before changing anything, and
/// that one not needing it works.
fn refused_for_a_damaged_blob(path: &str, packed: bool, missing: bool) {
    let mut h = history();
    let dir = h.m.dir.clone();
    let id = blob_id(&dir, 2, path);
    let where_ = stored(&dir, &id);
    assert_eq!(
        matches!(where_, Stored::Packed { .. }),
        packed,
        "{path}'s pre-image is not stored as the test expects"
    );
    damage(&where_, missing);
    let kind = if missing { "blob-missing" } else { "blob-hash" };

    let o = cli(&dir, &["fsck"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.starts_with("error") && l.contains(kind) && l.contains(&format!("{path}:"))),
        "fsck must name {kind} for {path}: {}",
        text(&o)
    );

    let before = tree(&dir, false);
    let store = store_bytes(&dir);
    let named = format!("{path}: blob");
    let o = cli(&dir, &["rewind", "2"]);
    assert_refused(&o, &["refused", &named]);
    assert_same_tree(&before, &tree(&dir, false));
    assert_eq!(store, store_bytes(&dir), "the store must not change either");
    let o = cli(&dir, &["rewind", "2", "--dry-run"]);
    assert_refused(&o, &[&named]);

    // Turn 3's rewind does not need that blob.
    let o = cli(&dir, &["rewind", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_same_tree(&h.at3, &tree(&dir, false));
    let before = tree(&dir, false);
    let o = cli(&dir, &["rewind", "2"]);
    assert_refused(&o, &[&named]);
    assert_same_tree(&before, &tree(&dir, false));
    h.m.remount();
}

#[test]
fn a_missing_blob_makes_the_rewind_refuse_before_changing_anything() {
    if !require_fuse() {
        return;
    }
    refused_for_a_damaged_blob("a", false, true);
    refused_for_a_damaged_blob("sub/file", true, true);
}

#[test]
fn a_blob_with_the_wrong_hash_makes_the_rewind_refuse_before_changing_anything() {
    if !require_fuse() {
        return;
    }
    refused_for_a_damaged_blob("a", false, false);
    refused_for_a_damaged_blob("sub/file", true, false);
}

#[test]
fn journal_paths_outside_the_folder_make_the_store_refuse_to_open() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    let out = canary();
    let out_before = tree(out.path(), true);
    let outside_rel = format!(
        "../../{}",
        out.path()
            .strip_prefix("/tmp")
            .expect("canary in /tmp")
            .display()
    );
    let original = journal(&dir);
    let a_blob = original
        .iter()
        .find(|l| l["op"] == "capture" && l["path"] == "a")
        .expect("capture of a")["pre"]
        .clone();
    let bad_paths: Vec<serde_json::Value> = vec![
        serde_json::json!(format!("{}/planted", out.path().display())),
        serde_json::json!(format!("{outside_rel}/planted")),
        serde_json::json!(format!("sub/../{outside_rel}/file")),
        serde_json::json!("sub/../../escape"),
        serde_json::json!(".ckpt/journal.jsonl"),
        // "../planted" as hex
        serde_json::json!({ "hex": "2e2e2f706c616e746564" }),
    ];
    let turn3 = original
        .iter()
        .position(|l| l["op"] == "turn" && l["turn"] == 3)
        .expect("turn 3 record");
    let mut case = 0;
    for path in &bad_paths {
        for pre in [serde_json::json!({"kind": "absent"}), a_blob.clone()] {
            // In the middle of the journal, and as its last (complete) line.
            for at in [turn3 + 1, original.len()] {
                case += 1;
                let mut lines = original.clone();
                lines.insert(
                    at,
                    serde_json::json!({
                        "v": 1, "seq": 0, "time": 0, "op": "capture", "turn": 3,
                        "path": path, "pre": pre,
                    }),
                );
                write_journal(&dir, &lines);
                let line_no = at + 1;
                let before = tree(&dir, false);
                let store = store_bytes(&dir);
                let o = cli(&dir, &["fsck"]);
                assert_eq!(o.status.code(), Some(1), "case {case} {path}: {}", text(&o));
                let fsck_out = String::from_utf8_lossy(&o.stdout);
                assert!(
                    fsck_out.lines().any(|l| l.starts_with("error")
                        && l.contains("journal-corrupt")
                        && l.contains(&format!("line {line_no}"))),
                    "case {case}: fsck must name line {line_no} ({path}): {}",
                    text(&o)
                );
                for args in [
                    &["rewind", "2"][..],
                    &["rewind", "3"],
                    &["rewind", "2", "--dry-run"],
                    &["log"],
                    &["turn", "4"],
                ] {
                    let o = cli(&dir, args);
                    assert_refused(&o, &[&format!("line {line_no}")]);
                }
                let o = Command::new(bin())
                    .arg("mount")
                    .arg(&dir)
                    .output()
                    .expect("run mount");
                assert_refused(&o, &[&format!("line {line_no}")]);
                assert!(
                    !std::fs::read_to_string("/proc/self/mountinfo")
                        .expect("mountinfo")
                        .contains(&format!(" {} ", dir.display())),
                    "case {case}: the refused mount must not be mounted"
                );
                assert_same_tree(&out_before, &tree(out.path(), true));
                assert_same_tree(&before, &tree(&dir, false));
                assert_eq!(store, store_bytes(&dir), "case {case}: the store changed");
                assert!(!dir.parent().expect("parent").join("escape").exists());
            }
        }
    }
    write_journal(&dir, &original);
    let o = cli(&dir, &["rewind", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_same_tree(&h.at2, &tree(&dir, false));
    assert_same_tree(&out_before, &tree(out.path(), true));
    h.m.remount();
}

#[test]
fn a_parent_swapped_for_a_symlink_to_outside_is_refused_and_completed_once_fixed() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    let out = canary();
    let out_before = tree(out.path(), true);
    std::fs::rename(dir.join("sub"), dir.join("sub.real")).expect("move sub away");
    std::os::unix::fs::symlink(out.path(), dir.join("sub")).expect("plant symlink");

    let o = cli(&dir, &["rewind", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).lines().count(),
        1,
        "{}",
        text(&o)
    );
    let report = String::from_utf8_lossy(&o.stdout);
    for p in ["sub/file", "sub/deep"] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("FAILED   {p}:")) && l.contains("symlink")),
            "{p} must be refused with a reason: {}",
            text(&o)
        );
    }
    assert!(report.contains("unfinished"), "{}", text(&o));
    assert_same_tree(&out_before, &tree(out.path(), true));
    // Everything else is back.
    for p in ["a", "b"] {
        assert_eq!(
            Some(&tree(&dir, false)[p]),
            h.at2.get(p),
            "{p} must be restored"
        );
    }
    assert!(!dir.join("c").exists() && !dir.join("d").exists());
    let o = cli(&dir, &["fsck"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("rewind-unfinished"),
        "{}",
        text(&o)
    );
    // Still refused while the symlink stands, whatever turn is asked for.
    let o = cli(&dir, &["rewind", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_same_tree(&out_before, &tree(out.path(), true));

    std::fs::remove_file(dir.join("sub")).expect("remove symlink");
    std::fs::rename(dir.join("sub.real"), dir.join("sub")).expect("put sub back");
    let o = cli(&dir, &["rewind", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_same_tree(&h.at2, &tree(&dir, false));
    assert_same_tree(&out_before, &tree(out.path(), true));
    let o = cli(&dir, &["fsck"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("rewind-unfinished"));
    h.m.remount();
    assert_same_tree(&h.at2, &tree(&dir, false));
}

#[test]
fn a_store_of_an_unknown_format_version_is_refused_by_every_command() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    std::fs::write(dir.join(".ckpt/VERSION"), "ckpt-mount store 9\n").expect("write VERSION");
    let before = tree(&dir, false);
    let store = store_bytes(&dir);
    let commands: &[&[&str]] = &[
        &["turn"],
        &["turn", "4"],
        &["rewind", "2"],
        &["rewind"],
        &["rewind", "2", "--dry-run"],
        &["rewind", "--undo"],
        &["log"],
        &["status"],
        &["status", "--json"],
        &["fsck"],
        &["fsck", "--json"],
        &["diff"],
        &["diff", "2", "--stat"],
        &["prune", "--keep-turns", "1"],
        &["run", "--", "touch", "ran"],
    ];
    for args in commands {
        let o = cli(&dir, args);
        assert_refused(&o, &["ckpt-mount store 9"]);
        assert!(
            o.stdout.is_empty(),
            "{args:?} printed to stdout: {}",
            text(&o)
        );
    }
    let o = Command::new(bin())
        .arg("mount")
        .arg(&dir)
        .output()
        .expect("run mount");
    assert_refused(&o, &["ckpt-mount store 9"]);
    assert!(!dir.join("ran").exists(), "run must not run the command");
    assert_same_tree(&before, &tree(&dir, false));
    assert_eq!(store, store_bytes(&dir), "the store must not change");
    std::fs::write(dir.join(".ckpt/VERSION"), "ckpt-mount store 1\n").expect("write VERSION");
    h.m.remount();
    h.m.rewind(2);
    assert_same_tree(&h.at2, &tree(&dir, false));
}

/// Every command that opens the store, run on an unmounted folder (`mount` apart).
const STORE_COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["status", "--log"],
    &["fsck"],
    &["fsck", "--json"],
    &["rewind", "1"],
    &["rewind", "2"],
    &["rewind", "2", "--dry-run"],
    &["rewind", "--undo"],
    &["undo"],
    &["redo"],
    &["op", "log"],
    &["log"],
    &["diff"],
    &["diff", "2", "--stat"],
    &["show", "2"],
    &["cat", "2", "--", "a"],
    &["turn"],
    &["turn", "4", "--offline"],
    &["prune", "--keep-turns", "1"],
    &["run", "--", "touch", "ran"],
];

/// Runs `mount DIR` (the real one, in the background) and asserts it is refused with `words`,
/// and that nothing was mounted.
fn assert_mount_refused(dir: &Path, words: &[&str]) {
    let o = Command::new(bin())
        .arg("mount")
        .arg(dir)
        .output()
        .expect("run mount");
    assert_refused(&o, words);
    assert!(
        !ckpt_mount::mounts::is_ckpt_mount(dir),
        "the refused mount of {} must not be mounted",
        dir.display()
    );
}

/// Every command that opens the store refuses it, with `words` in its one line and nothing on
/// stdout, and neither the folder nor the store (nor anything a symlink in it points to)
/// changes: compared byte for byte.
fn assert_refused_by_every_command(dir: &Path, words: &[&str], also: Option<&Path>) {
    let before = tree(dir, false);
    let store = store_bytes(dir);
    let outside = also.map(|p| tree(p, true));
    for args in STORE_COMMANDS {
        // `--dir` goes after the subcommand's own words (`op log`), before a `--`.
        let sub = if args[0] == "op" { 2 } else { 1 };
        let o = Command::new(bin())
            .args(&args[..sub])
            .arg("--dir")
            .arg(dir)
            .args(&args[sub..])
            .output()
            .expect("run ckpt-mount");
        assert_refused(&o, words);
        assert!(
            o.stdout.is_empty(),
            "{args:?} printed to stdout: {}",
            text(&o)
        );
    }
    assert_mount_refused(dir, words);
    assert!(!dir.join("ran").exists(), "run must not run the command");
    assert_same_tree(&before, &tree(dir, false));
    assert_eq!(store, store_bytes(dir), "a refusal changed the store");
    if let (Some(p), Some(t)) = (also, outside) {
        assert_same_tree(&t, &tree(p, true));
    }
}

/// Replaces the store of `dir` with the copy `saved` (`cp -a`, so modes and times are kept).
fn restore_store(dir: &Path, saved: &Path) {
    let store = dir.join(".ckpt");
    if std::fs::symlink_metadata(&store).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(&store).expect("remove the .ckpt symlink");
    } else if store.exists() {
        std::fs::remove_dir_all(&store).expect("remove the store");
    }
    let ok = Command::new("cp")
        .arg("-a")
        .arg(saved)
        .arg(&store)
        .status()
        .expect("run cp")
        .success();
    assert!(ok, "cp -a of the saved store failed");
}

/// A copy of the store of `dir` beside the folder (not in it: trees compare the folder).
fn save_store(dir: &Path) -> PathBuf {
    let saved = dir.parent().expect("parent").join("store.saved");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(dir.join(".ckpt"))
        .arg(&saved)
        .status()
        .expect("run cp")
        .success();
    assert!(ok, "cp -a of the store failed");
    saved
}

/// What a store lost while its blobs stayed.
#[derive(Debug, Clone, Copy)]
enum Lost {
    JournalRemoved,
    JournalEmptied,
    /// Cut to a first line without its end (a torn first append).
    JournalTorn,
    VersionRemoved,
}

#[test]
fn blobs_without_a_journal_or_a_version_are_refused_never_reset() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    let saved = save_store(&dir);
    let journal = journal_path(&dir);
    for damage in [
        Lost::JournalRemoved,
        Lost::JournalEmptied,
        Lost::JournalTorn,
        Lost::VersionRemoved,
    ] {
        restore_store(&dir, &saved);
        let words: &[&str] = match damage {
            Lost::JournalRemoved => {
                std::fs::remove_file(&journal).expect("rm journal");
                &["blobs (", "but no journal", "fsck --start-over"]
            }
            Lost::JournalEmptied => {
                std::fs::write(&journal, b"").expect("empty journal");
                &["blobs (", "but an empty journal", "fsck --start-over"]
            }
            Lost::JournalTorn => {
                std::fs::write(&journal, br#"{"v":1,"seq":1,"ti"#).expect("tear");
                &["blobs (", "without one whole record", "fsck --start-over"]
            }
            Lost::VersionRemoved => {
                std::fs::remove_file(dir.join(".ckpt/VERSION")).expect("rm VERSION");
                &[
                    "a journal (",
                    "blobs (",
                    "but no VERSION",
                    "fsck --start-over",
                ]
            }
        };
        eprintln!("case: {damage:?}");
        assert_refused_by_every_command(&dir, words, None);
    }
    restore_store(&dir, &saved);
    h.m.remount();
    h.m.rewind(2);
    assert_same_tree(&h.at2, &tree(&dir, false));
}

#[test]
fn a_symlinked_store_journal_or_version_is_refused_never_followed() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    let saved = save_store(&dir);
    let elsewhere = canary();
    let real = elsewhere.path().join("real-store");
    // The store moved out of the folder, a symlink left in its place.
    restore_store(&dir, &saved);
    std::fs::rename(dir.join(".ckpt"), &real).expect("move the store out");
    std::os::unix::fs::symlink(&real, dir.join(".ckpt")).expect("symlink .ckpt");
    let target = real.display().to_string();
    assert_refused_by_every_command(
        &dir,
        &[".ckpt is a symlink", &target, "never follows"],
        Some(elsewhere.path()),
    );
    std::fs::remove_file(dir.join(".ckpt")).expect("remove the symlink");
    std::fs::remove_dir_all(&real).expect("remove the moved store");
    for name in ["journal.jsonl", "VERSION"] {
        restore_store(&dir, &saved);
        let moved = elsewhere.path().join(name);
        std::fs::rename(dir.join(".ckpt").join(name), &moved).expect("move the file out");
        std::os::unix::fs::symlink(&moved, dir.join(".ckpt").join(name)).expect("symlink");
        let shown = format!(".ckpt/{name} is a symlink");
        let target = moved.display().to_string();
        assert_refused_by_every_command(&dir, &[&shown, &target], Some(elsewhere.path()));
        std::fs::remove_file(&moved).expect("remove the moved file");
    }
    restore_store(&dir, &saved);
    h.m.remount();
    h.m.rewind(2);
    assert_same_tree(&h.at2, &tree(&dir, false));
}

#[test]
fn start_over_sets_the_old_blobs_aside_and_a_new_history_begins() {
    if !require_fuse() {
        return;
    }
    let mut h = history();
    let dir = h.m.dir.clone();
    // On a store that opens as it is, and on a mounted folder: refused, nothing moved.
    let store = store_bytes(&dir);
    let o = cli(&dir, &["fsck", "--start-over"]);
    assert_refused(&o, &["nothing to start over"]);
    assert_eq!(store, store_bytes(&dir));
    h.m.remount();
    let o = cli(&dir, &["fsck", "--start-over"]);
    assert_refused(&o, &["is mounted", "unmount it first"]);
    h.m.unmount();

    let blobs_before: BTreeMap<String, Vec<u8>> = store_bytes(&dir)
        .into_iter()
        .filter(|(k, _)| k.starts_with("blobs/") || k.starts_with("staged/"))
        .collect();
    assert!(blobs_before.keys().any(|k| k.contains("packs/pack-")));
    std::fs::remove_file(journal_path(&dir)).expect("rm journal");
    let at_damage = tree(&dir, false);
    let o = cli(&dir, &["fsck", "--start-over"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let attic = out
        .split_whitespace()
        .find(|w| w.contains("/.ckpt/attic/"))
        .unwrap_or_else(|| panic!("the line names where the old store went: {out}"))
        .trim_end_matches(':');
    assert!(out.contains("deleting nothing"), "{out}");
    let attic = Path::new(attic);
    assert!(attic.starts_with(dir.join(".ckpt/attic")), "{out}");
    let kept: BTreeMap<String, Vec<u8>> = store_bytes(&dir)
        .into_iter()
        .filter_map(|(k, v)| {
            let rel = attic.strip_prefix(dir.join(".ckpt")).ok()?;
            let k = k.strip_prefix(&format!("{}/", rel.display()))?.to_string();
            (k.starts_with("blobs/") || k.starts_with("staged/")).then_some((k, v))
        })
        .collect();
    assert_eq!(kept, blobs_before, "every blob kept, byte for byte");
    assert_same_tree(&at_damage, &tree(&dir, false));

    // The new history: fsck is clean, a mount begins turn 1 and captures again.
    let o = cli(&dir, &["fsck"]);
    assert!(o.status.success(), "{}", text(&o));
    h.m.remount();
    assert_eq!(
        String::from_utf8_lossy(&h.m.cli(&["turn"]).stdout).trim(),
        "1"
    );
    h.m.turn(2);
    h.m.sh("echo new > a");
    h.m.rewind(2);
    assert_same_tree(&at_damage, &tree(&dir, false));
    h.m.unmount();
    let o = cli(&dir, &["fsck"]);
    assert!(o.status.success(), "the attic is not stray: {}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("stray"));
}

#[test]
fn a_fresh_store_with_no_captures_and_an_empty_store_directory_still_open() {
    if !require_fuse() {
        return;
    }
    // A store the mount made, nothing captured yet: every command works on it.
    let mut m = Mounted::new();
    m.unmount();
    let dir = m.dir.clone();
    for args in [&["status"][..], &["fsck"], &["log"], &["rewind", "1"]] {
        let o = cli(&dir, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    m.remount();
    m.unmount();
    // Its journal gone, but no blob either: nothing is lost, so it opens as new.
    std::fs::remove_file(journal_path(&dir)).expect("rm journal");
    let o = cli(&dir, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    // A first mount that stopped after making `.ckpt` and its lock: mounted as new.
    std::fs::remove_dir_all(dir.join(".ckpt")).expect("rm store");
    std::fs::create_dir(dir.join(".ckpt")).expect("mkdir store");
    std::fs::write(dir.join(".ckpt/lock"), b"").expect("lock");
    m.remount();
    m.turn(2);
    m.sh("echo x > f");
    m.rewind(2);
    assert!(!dir.join("f").exists());
}

//! Bad input to every subcommand: missing and wrong arguments, folders that do not exist, are
//! not a store, are not mounted, turns that do not exist or are not numbers, a store of an
//! unknown format. Each is one line on stderr (clap's usage errors may add help after an
//! `error:` line), exit code 2 for usage and 1 for failures, and nothing changes on disk.
//!
//! Bad arguments that need no folder to refuse are unit tests (src/cli/tests.rs), with the
//! whole text of each refusal in a reviewed snapshot; here are the cases that need a folder
//! or a mount, and one of each kind of usage error run through the binary end to end.

mod common;
use common::{Mounted, Node, bin, require_fuse, store_bytes, tree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a case must answer.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// clap's usage error: exit 2, the first stderr line starts with `error:`.
    Clap,
    /// No subcommand at all: clap prints the help on stderr and exits 2.
    Help,
    /// Our own usage error: exit 2, one line.
    Usage(&'static str),
    /// A failure: exit 1, one line containing the text.
    Fail(&'static str),
    /// The command `run` could not start: exit 127 (as `env` and shells do), one line.
    NotRun(&'static str),
}

/// The folders the cases name.
struct Folders {
    /// Unmounted, with three turns of history.
    offline: Mounted,
    /// Mounted, with three turns of history.
    mounted: Mounted,
    /// A store of format version 9, unmounted.
    version9: Mounted,
    /// Scratch space: an empty folder, a regular file, a path that does not exist.
    scratch: tempfile::TempDir,
}

impl Folders {
    fn empty(&self) -> PathBuf {
        self.scratch.path().join("empty")
    }
    fn file(&self) -> PathBuf {
        self.scratch.path().join("file")
    }
    fn missing(&self) -> PathBuf {
        self.scratch.path().join("does-not-exist")
    }

    fn expand(&self, arg: &str) -> String {
        arg.replace("{D}", &self.offline.dir.display().to_string())
            .replace("{M}", &self.mounted.dir.display().to_string())
            .replace("{V}", &self.version9.dir.display().to_string())
            .replace("{E}", &self.empty().display().to_string())
            .replace("{F}", &self.file().display().to_string())
            .replace("{N}", &self.missing().display().to_string())
    }
}

fn with_history(m: &mut Mounted) {
    m.turn(2);
    m.sh("echo a2 > a; rm b; mkdir -p d; echo c > d/c");
    m.turn(3);
    m.sh("echo a3 > a; rm -r d");
}

fn setup_files(d: &Path) {
    std::fs::write(d.join("a"), "a1\n").expect("write a");
    std::fs::write(d.join("b"), "b1\n").expect("write b");
}

/// Everything on disk a case could change: the trees and the store bytes of each folder
/// (the mounted one's real store, behind the mount), and the scratch space.
type Snapshot = Vec<(String, BTreeMap<String, Node>, BTreeMap<String, Vec<u8>>)>;

fn snapshot(f: &Folders, mounted_raw: &Path) -> Snapshot {
    let mut raw_store = store_bytes(mounted_raw);
    // The daemon's log may gain lines from requests it refuses; it is not history.
    raw_store.remove("daemon.log");
    vec![
        (
            "offline".into(),
            tree(&f.offline.dir, false),
            store_bytes(&f.offline.dir),
        ),
        ("mounted".into(), tree(&f.mounted.dir, false), raw_store),
        (
            "version9".into(),
            tree(&f.version9.dir, false),
            store_bytes(&f.version9.dir),
        ),
        (
            "scratch".into(),
            tree(f.scratch.path(), true),
            BTreeMap::new(),
        ),
    ]
}

/// Which of the folders are mount points now.
fn mounted_now(f: &Folders) -> Vec<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    [
        f.offline.dir.clone(),
        f.mounted.dir.clone(),
        f.version9.dir.clone(),
        f.empty(),
    ]
    .iter()
    .map(|d| info.contains(&format!(" {} ", d.display())))
    .collect()
}

#[test]
fn every_subcommand_refuses_bad_input_in_one_line_and_changes_nothing() {
    if !require_fuse() {
        return;
    }
    let mut offline = Mounted::with(setup_files);
    with_history(&mut offline);
    offline.unmount();
    let mut mounted = Mounted::with(setup_files);
    with_history(&mut mounted);
    let mut version9 = Mounted::with(setup_files);
    with_history(&mut version9);
    version9.unmount();
    std::fs::write(version9.dir.join(".ckpt/VERSION"), "ckpt-mount store 9\n")
        .expect("write VERSION");
    let scratch = tempfile::Builder::new()
        .prefix("ckpt-bad-input-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::create_dir(scratch.path().join("empty")).expect("mkdir empty");
    std::fs::write(scratch.path().join("file"), "not a folder\n").expect("write file");
    let f = Folders {
        offline,
        mounted,
        version9,
        scratch,
    };
    let raw = common::raw_folder(&f.mounted);

    use Want::*;
    let cases: &[(&[&str], Want)] = &[
        // The cases the arguments alone decide (clap's usage errors and ours, `Cli::check`)
        // are unit tests in src/cli/tests.rs, with their whole texts. Here, one of each kind
        // through the binary, aimed at the mounted folder: exit 2, the stderr shape, and
        // nothing changed on disk or in the mounts.
        (&[], Help),
        (&["rewind", "two", "--dir", "{M}"], Clap),
        (
            &["turn", "0", "--dir", "{M}"],
            Usage("a turn is a whole number"),
        ),
        (
            &["turn", "9007199254740991", "--dir", "{M}"],
            Usage("a turn is a whole number from 1 to 4294967295"),
        ),
        (
            &["prune", "--keep-turns", "0", "--dir", "{M}"],
            Usage("--keep-turns must be at least 1"),
        ),
        // mount
        (&["mount", "{N}"], Fail("cannot open")),
        (&["mount", "{F}"], Fail("not a directory")),
        (&["mount", "{M}"], Fail("already mounted")),
        (&["mount", "{V}"], Fail("ckpt-mount store 9")),
        // unmount
        (&["unmount", "{N}"], Fail("cannot open")),
        (&["unmount", "{D}"], Fail("not mounted")),
        (&["unmount", "{E}"], Fail("not mounted")),
        (&["unmount", "{F}"], Fail("not mounted")),
        (&["unmount", "{V}"], Fail("not mounted")),
        // turn
        (
            &["turn", "1", "--offline", "--dir", "{D}"],
            Fail("greater than the current turn 3"),
        ),
        (&["turn", "4", "--dir", "{D}"], Fail("is not mounted")),
        (
            &["turn", "2", "--dir", "{M}"],
            Fail("greater than the current turn 3"),
        ),
        (&["turn", "--dir", "{N}"], Fail("cannot open")),
        (&["turn", "--dir", "{E}"], Fail("no ckpt-mount store")),
        (&["turn", "--dir", "{F}"], Fail("")),
        (&["turn", "4", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (&["turn"], Fail("not inside a ckpt-mount folder")),
        // rewind
        (
            &["rewind", "99", "--dir", "{D}"],
            Usage("turn 99 does not exist"),
        ),
        (
            &["rewind", "99", "--dry-run", "--dir", "{D}"],
            Usage("turn 99 does not exist"),
        ),
        (
            &["rewind", "99", "--dir", "{M}"],
            Usage("turn 99 does not exist"),
        ),
        (
            &["rewind", "9007199254740993", "--dir", "{D}"],
            Usage("does not exist"),
        ),
        (
            &["rewind", "--undo", "--dir", "{D}"],
            Fail("no rewind to undo"),
        ),
        (
            &["rewind", "--undo", "--dir", "{M}"],
            Fail("no rewind to undo"),
        ),
        (&["rewind", "2", "--dir", "{N}"], Fail("cannot open")),
        (
            &["rewind", "2", "--dir", "{E}"],
            Fail("no ckpt-mount store"),
        ),
        (&["rewind", "2", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (
            &["rewind", "2", "--dir", "{D}", "--", "../escape"],
            Usage(""),
        ),
        (
            &["rewind", "2", "--dir", "{D}", "--", "/etc/passwd"],
            Usage(""),
        ),
        (
            &["rewind", "2", "--dir", "{M}", "--", "../escape"],
            Usage(""),
        ),
        (&["rewind", "2"], Fail("not inside a ckpt-mount folder")),
        // log
        (&["log", "--dir", "{N}"], Fail("cannot open")),
        (&["log", "--dir", "{E}"], Fail("no ckpt-mount store")),
        (&["log", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (&["log"], Fail("not inside a ckpt-mount folder")),
        // status
        (&["status", "--dir", "{N}"], Fail("cannot open")),
        (&["status", "--dir", "{E}"], Fail("no ckpt-mount store")),
        (&["status", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (&["status"], Fail("not inside a ckpt-mount folder")),
        // fsck
        (&["fsck", "--dir", "{N}"], Fail("cannot open")),
        (&["fsck", "--dir", "{E}"], Fail("no ckpt-mount store")),
        (&["fsck", "--dir", "{F}"], Fail("")),
        (&["fsck", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (&["fsck"], Fail("not inside a ckpt-mount folder")),
        // diff
        (
            &["diff", "99", "--dir", "{D}"],
            Usage("turn 99 does not exist"),
        ),
        (
            &["diff", "99", "--dir", "{M}"],
            Usage("turn 99 does not exist"),
        ),
        (&["diff", "0", "--dir", "{D}"], Usage("does not exist")),
        (&["diff", "--dir", "{D}", "--", "../escape"], Usage("")),
        (&["diff", "--dir", "{M}", "--", "/etc/passwd"], Usage("")),
        (&["diff", "--dir", "{N}"], Fail("cannot open")),
        (&["diff", "--dir", "{E}"], Fail("no ckpt-mount store")),
        (&["diff", "--dir", "{V}"], Fail("ckpt-mount store 9")),
        (&["diff"], Fail("not inside a ckpt-mount folder")),
        // prune: one that forgets anything needs --yes off a terminal (stdin here is not one)
        (
            &["prune", "--keep-turns", "1", "--dir", "{M}"],
            Fail("not pruned: the prune would forget 2 turns (1, 2)"),
        ),
        (
            &["prune", "--drop-undo", "--dir", "{D}"],
            Fail("pass --yes to prune, or --dry-run"),
        ),
        (
            &["prune", "--keep-turns", "1", "--dir", "{N}"],
            Fail("cannot open"),
        ),
        (
            &["prune", "--keep-turns", "1", "--dir", "{E}"],
            Fail("no ckpt-mount store"),
        ),
        (
            &["prune", "--keep-turns", "1", "--dir", "{V}"],
            Fail("ckpt-mount store 9"),
        ),
        (
            &["prune", "--keep-turns", "1"],
            Fail("not inside a ckpt-mount folder"),
        ),
        // run
        (
            &["run", "--dir", "{N}", "--", "touch", "ran"],
            Fail("cannot open"),
        ),
        (
            &["run", "--dir", "{F}", "--", "touch", "ran"],
            Fail("not a directory"),
        ),
        (
            &["run", "--dir", "{V}", "--", "touch", "ran"],
            Fail("ckpt-mount store 9"),
        ),
        (
            &["run", "--dir", "{M}", "--", "/nonexistent/program"],
            NotRun("cannot run"),
        ),
    ];

    let mounts_before = mounted_now(&f);
    assert_eq!(mounts_before, [false, true, false, false]);
    let mut failures = Vec::new();
    for (args, want) in cases {
        let args: Vec<String> = args.iter().map(|a| f.expand(a)).collect();
        let before = snapshot(&f, &raw);
        let o = Command::new(bin())
            .args(&args)
            // Not inside any ckpt-mount folder, for the cases that name none.
            .current_dir(f.empty())
            .output()
            .expect("run ckpt-mount");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let lines: Vec<&str> = err.lines().collect();
        let code = o.status.code();
        let problem = match *want {
            Clap if code != Some(2) => Some("clap usage errors exit 2".to_string()),
            Clap if !lines.first().is_some_and(|l| l.starts_with("error:")) => {
                Some("the first stderr line must start with error:".into())
            }
            Help if code != Some(2) || !err.contains("Usage:") => {
                Some("no subcommand: help on stderr, exit 2".into())
            }
            Usage(_) | Fail(_) | NotRun(_) if lines.len() != 1 => {
                Some(format!("exactly one stderr line, not {}", lines.len()))
            }
            Usage(_) if code != Some(2) => Some("usage errors exit 2".into()),
            Fail(_) if code != Some(1) => Some("failures exit 1".into()),
            NotRun(_) if code != Some(127) => Some("a command that cannot run exits 127".into()),
            Usage(t) | Fail(t) | NotRun(t) if !err.contains(t) => {
                Some(format!("stderr must contain {t:?}"))
            }
            Usage(_) | Fail(_) | NotRun(_) if !err.starts_with("ckpt-mount: ") => {
                Some("the line must start with ckpt-mount:".into())
            }
            _ => None,
        };
        if let Some(p) = problem {
            failures.push(format!(
                "{args:?} ({want:?}): {p}\n    exit {code:?}, stderr: {err:?}"
            ));
        }
        let after = snapshot(&f, &raw);
        for (b, a) in before.iter().zip(&after) {
            if b != a {
                failures.push(format!("{args:?}: the {} folder changed on disk", b.0));
            }
        }
        if mounted_now(&f) != mounts_before {
            failures.push(format!("{args:?}: the set of mounts changed"));
        }
        assert!(
            f.mounted.dir.join(".ckpt/turn").is_file(),
            "{args:?}: the mount is gone"
        );
    }
    assert!(
        !f.offline.dir.join("ran").exists()
            && !f.version9.dir.join("ran").exists()
            && !f.empty().join("ran").exists(),
        "run must not have run its command"
    );
    // The mounted folder's history is whole and its daemon still answers.
    let o = f.mounted.cli(&["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(
        std::fs::read_to_string(f.mounted.path(".ckpt/turn")).expect("turn"),
        "3\n"
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

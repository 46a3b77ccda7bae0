//! `prune` never surprises (issue 29): a prune that forgets no turn keeps every undo and redo;
//! `--dry-run` says what a prune would forget and free and changes no byte of the store; one
//! that forgets anything asks on a terminal and needs `--yes` off one; mounted or not, the
//! answers are the same. On real mounts.

mod common;
use common::output_text as text;
use common::{Mounted, Tmpfs, assert_same_tree, on_a_terminal, require_fuse, store_bytes, tree};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_str(&ok(o)).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

/// The folder's trees at each step of [`history`].
struct Trees {
    /// After the rewind to turn 2: what `redo` gives back.
    rewound: BTreeMap<String, common::Node>,
    /// Before it (and after its undo): what `undo` after that `redo` gives back.
    three: BTreeMap<String, common::Node>,
}

/// Turns 1 to 3 with changes, a rewind to turn 2 (turn 3's work rewound), and that rewind
/// undone: every kind of history a prune could lose is there, an undo (`#3`, the switch to
/// turn 3) and a redo (`#4`, the rewind), with turn 3's work behind it.
fn history(m: &Mounted) -> Trees {
    m.turn(2);
    m.sh("echo two > a && echo new > b && mkdir -p d && echo deep > d/e");
    m.turn(3);
    m.sh("echo three > a && rm b && head -c 100000 /dev/urandom > big");
    let three = tree(&m.dir, false);
    ok(&m.cli(&["rewind", "2", "-y"]));
    let rewound = tree(&m.dir, false);
    ok(&m.cli(&["undo"]));
    assert_same_tree(&three, &tree(&m.dir, false));
    Trees { rewound, three }
}

/// Every byte of the store below `dir` but the daemon's log (not history).
fn store(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut s = store_bytes(dir);
    s.remove("daemon.log");
    s
}

#[test]
fn a_prune_that_forgets_no_turn_keeps_every_undo_and_redo() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    let trees = history(&m);
    // The case: more turns kept than there are. Off a terminal, with no --yes: nothing
    // it does needs one.
    let out = ok(&m.cli(&["prune", "--keep-turns", "20"]));
    assert!(
        out.starts_with("pruned nothing; kept [1, 2, 3] and every undo and redo; "),
        "{out}"
    );
    let r = json_of(&m.cli(&["prune", "--keep-turns", "20", "--json"]));
    assert_eq!(r["lost"], json!([]), "{r:#}");
    assert_eq!(r["op"], Value::Null, "no operation: nothing to undo");
    let ops = json_of(&m.cli(&["op", "log", "--json"]));
    assert!(
        ops.as_array()
            .is_some_and(|a| a.iter().all(|o| o["kind"] != "prune")),
        "{ops:#}"
    );
    // The redo and the undo after it are exact.
    ok(&m.cli(&["redo"]));
    assert_same_tree(&trees.rewound, &tree(&m.dir, false));
    ok(&m.cli(&["undo"]));
    assert_same_tree(&trees.three, &tree(&m.dir, false));
    let fsck = ok(&m.cli(&["fsck"]));
    assert!(fsck.contains(" 0 errors"), "{fsck}");
}

#[test]
fn a_dry_run_changes_no_byte_of_the_store_and_says_what_the_prune_does() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    history(&m);
    let raw = common::raw_folder(&m);
    // `status` stores any staged pre-image first, as every reader of the store does.
    ok(&m.cli(&["status"]));
    let before = store(&raw);
    for args in [
        &["prune", "--dry-run"][..],
        &["prune", "--dry-run", "--keep-turns", "1"],
        &["prune", "--dry-run", "--drop-undo", "--json"],
        &["prune", "--dry-run", "--max-size", "1"],
        &["prune", "--dry-run", "--keep-turns", "1", "--yes"],
    ] {
        let out = ok(&m.cli(args));
        assert!(
            args.contains(&"--json") || out.contains("dry run, nothing changed: "),
            "{args:?}: {out}"
        );
        assert_eq!(store(&raw), before, "{args:?} changed the store");
    }
    let dry = ok(&m.cli(&["prune", "--dry-run", "--keep-turns", "1"]));
    for line in [
        "forget   turn 1 \"mounted\"\n",
        "forget   turn 2\n",
        "no undo  #2 turn 2 begins (after turn 1)\n",
        "no undo  #3 turn 3 begins (after turn 2)\n",
        "no redo  #4 rewind to turn 2 (from turn 3) (",
        "dry run, nothing changed: the prune would forget 2 turns, 2 undo steps and 1 redo step, and free ",
    ] {
        assert!(dry.contains(line), "{line:?} not in:\n{dry}");
    }

    // Mounted or not, the same answer.
    let preview = json_of(&m.cli(&["prune", "--dry-run", "--keep-turns", "1", "--json"]));
    m.unmount();
    let offline_before = store(&m.dir);
    let offline = json_of(&m.cli(&["prune", "--dry-run", "--keep-turns", "1", "--json"]));
    assert_eq!(
        store(&m.dir),
        offline_before,
        "the offline dry run changed it"
    );
    assert_eq!(offline, preview);
    m.remount();

    // The prune does what its dry run said, to the byte.
    let done = json_of(&m.cli(&["prune", "--keep-turns", "1", "--yes", "--json"]));
    assert_eq!(done["dry_run"], false);
    for key in [
        "dropped_turns",
        "lost_ops",
        "lost_rewound_turns",
        "lost",
        "kept_turns",
        "removed_blobs",
        "freed_bytes",
        "store_bytes",
        "op",
    ] {
        assert_eq!(preview[key], done[key], "{key}: {preview:#}\n{done:#}");
    }
}

#[test]
fn off_a_terminal_a_prune_that_forgets_anything_needs_yes() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    history(&m);
    let raw = common::raw_folder(&m);
    ok(&m.cli(&["status"]));
    let before = store(&raw);
    for args in [
        &["prune", "--keep-turns", "2"][..],
        &["prune", "--keep-turns", "2", "--json"],
        &["prune", "--drop-undo"],
        &["prune", "--max-size", "1"],
    ] {
        let o = m.cli(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("ckpt-mount: not pruned: the prune would ")
                && err.contains("; pass --yes to prune, or --dry-run to see all it would forget"),
            "{args:?}: {err}"
        );
        assert_eq!(store(&raw), before, "{args:?} changed the store");
    }
    let o = m.cli(&["prune", "--keep-turns", "2"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "ckpt-mount: not pruned: the prune would forget 1 turn (1) and make 3 operations impossible to undo or redo (#2, #3, #4); pass --yes to prune, or --dry-run to see all it would forget\n"
    );

    // --drop-undo --yes: every turn kept, the undo and redo history gone.
    let r = json_of(&m.cli(&["prune", "--drop-undo", "--yes", "--json"]));
    assert_eq!(r["dropped_turns"], json!([]), "{r:#}");
    assert_eq!(r["kept_turns"], json!([1, 2, 3]), "{r:#}");
    assert_eq!(r["lost_ops"], json!([2, 3, 4]), "{r:#}");
    let o = m.cli(&["undo"]);
    assert_eq!(o.status.code(), Some(1), "nothing to undo: {}", text(&o));
    // The turns are whole: a rewind to turn 2 is exact.
    let fsck = ok(&m.cli(&["fsck"]));
    assert!(fsck.contains(" 0 errors"), "{fsck}");
    ok(&m.cli(&["rewind", "1", "-y"]));
    assert_eq!(
        std::fs::read_to_string(m.path("a")).expect("a"),
        "one\n",
        "turn 1 kept"
    );
}

#[test]
fn on_a_terminal_a_prune_that_forgets_shows_what_and_asks() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    history(&m);
    let raw = common::raw_folder(&m);
    ok(&m.cli(&["status"]));
    let before = store(&raw);
    // "n", Esc, an empty line: nothing changes, exit 1.
    for answer in ["n", "\u{1b}", ""] {
        let (shown, code) = on_a_terminal(answer, &["prune", "--keep-turns", "2"], &m.dir);
        assert_eq!(code, Some(1), "{answer:?}: {shown}");
        assert!(
            shown.starts_with(
                "forget   turn 1 \"mounted\"\n\
                 no undo  #2 turn 2 begins (after turn 1)\n\
                 no undo  #3 turn 3 begins (after turn 2)\n\
                 no redo  #4 rewind to turn 2 (from turn 3) (restored 1, deleted 2)\n\
                 The prune will forget 1 turn, 2 undo steps and 1 redo step, and free "
            ),
            "{answer:?}: {shown}"
        );
        assert!(
            shown.contains(". This cannot be undone.\nProceed? [y/N] "),
            "{shown}"
        );
        assert!(
            shown.ends_with("ckpt-mount: cancelled: nothing changed\n"),
            "{answer:?}: {shown}"
        );
        assert_eq!(store(&raw), before, "{answer:?} changed the store");
    }
    // A prune that forgets nothing asks nothing.
    let (shown, code) = on_a_terminal("n", &["prune", "--keep-turns", "20"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("Proceed?"), "{shown}");
    // "y" prunes.
    let (shown, code) = on_a_terminal("y", &["prune", "--keep-turns", "2"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("pruned turns [1]; kept [2, 3]; removed "),
        "{shown}"
    );
    let r = json_of(&m.cli(&["log", "--json"]));
    let turns: Vec<u64> = r
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["turn"].as_u64())
        .collect();
    assert!(!turns.contains(&1), "{r:#}");
}

/// `status` warns past 10 % of the free space and says so, and what it points at runs.
#[test]
fn status_says_what_its_size_warning_means_and_points_at_a_dry_run() {
    if !require_fuse() {
        return;
    }
    let mut fs_guard = None;
    let m = Mounted::with(|d| {
        fs_guard = Some(Tmpfs::mount(d, "size=4m"));
        let noise: Vec<u8> = (0..600_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(d.join("big"), noise).expect("write big");
    });
    assert!(fs_guard.is_some());
    m.turn(2);
    m.sh("echo small > big");
    // Turn 2's pre-image of `big` is what forgetting turn 2 would free.
    m.turn(3);
    let status = ok(&m.cli(&["status"]));
    let warning = status
        .lines()
        .find(|l| l.starts_with("warning:  the store holds "))
        .unwrap_or_else(|| panic!("no size warning: {status}"));
    assert!(
        warning.contains(", more than 10 % of the ")
            && warning.ends_with(
                " free on its disk; see what a prune would free: ckpt-mount prune --dry-run"
            ),
        "{warning}"
    );
    let dry = ok(&m.cli(&["prune", "--dry-run"]));
    assert!(
        dry.contains("ckpt-mount prune --keep-turns 1 would free "),
        "{dry}"
    );
}

//! `op show ID` and `op restore ID` on real mounts, as a user runs them: several turns, a
//! partial rewind, a whole rewind and its undo, each operation's folder snapshotted when it
//! ended; then `op show` of each, and `op restore` of each: the whole tree byte for byte (modes,
//! symlinks, hard-link sharing) equal to that snapshot, the turns and the other turns' `log`
//! rows untouched, `undo` giving back exactly the tree before it and `redo` the restored one.
//! An operation that does not exist, or that changed no path, is refused in one line.

mod common;
use common::output_text as text;
use common::{Mounted, Node, assert_same_tree, tree};
use std::collections::BTreeMap;
use std::process::Output;

type Tree = BTreeMap<String, Node>;

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("json")
}

/// The id of the newest operation (`op log` lists newest first).
fn newest(m: &Mounted) -> u64 {
    json(m.cli(&["op", "log", "--json"]))[0]["id"]
        .as_u64()
        .expect("an id")
}

/// The folder as it is now, keyed by the operation that just ended.
fn snap(m: &Mounted, snaps: &mut BTreeMap<u64, Tree>) -> u64 {
    let id = newest(m);
    snaps.insert(id, tree(&m.dir, false));
    id
}

/// The `log` rows, the current turn's counts left out (an `op restore` is a change of the
/// current turn: what it overwrites is captured for it, as any change is).
fn turns_view(m: &Mounted) -> Vec<serde_json::Value> {
    let current = json(m.cli(&["status", "--json"]))["turn"].clone();
    let rows = json(m.cli(&["log", "--json"]));
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            if r["turn"] == current && r["rewound_by"].is_null() {
                serde_json::json!({"turn": r["turn"], "label": r["label"]})
            } else {
                r.clone()
            }
        })
        .collect()
}

/// Builds the history: returns the snapshots of the folder just after each operation that
/// has one, and the ids of the partial rewind, the whole rewind and its undo.
fn history(m: &Mounted) -> (BTreeMap<u64, Tree>, [u64; 3]) {
    let mut snaps = BTreeMap::new();
    snap(m, &mut snaps); // #1: the store created, turn 1
    ok(m.cli(&["turn", "2", "-m", "second"]));
    snap(m, &mut snaps);
    m.sh("echo two > f; echo new > g; rm d/x; chmod 600 k; printf 'a\\nb\\n' > café");
    ok(m.cli(&["turn", "3", "-m", "third"]));
    snap(m, &mut snaps);
    // k2 is a hard link of k: written through it, k changes too.
    m.sh("echo three > f; echo more >> k2; rm g; ln -s f link; mkdir e; echo y > e/y");
    ok(std::process::Command::new(common::bin())
        .args(["rewind", "2", "--yes", "--dir"])
        .arg(&m.dir)
        .args(["--", "f"])
        .output()
        .expect("run cli"));
    let partial = snap(m, &mut snaps);
    // Changed again after the partial rewind: its end must be recorded all the same.
    m.sh("echo four > f; echo z > e/z");
    ok(m.cli(&["rewind", "2", "--yes"]));
    let rewind = snap(m, &mut snaps);
    m.sh("echo after > h");
    ok(m.cli(&["undo", "--yes"]));
    let undo = snap(m, &mut snaps);
    m.sh("echo late > f2; rm -r e");
    (snaps, [partial, rewind, undo])
}

/// `op show` of each operation: the folder's paths for those that changed it, words for
/// turn switches.
fn shows(m: &Mounted, [partial, rewind, undo]: [u64; 3]) {
    for id in 1..=3 {
        let shown = json(m.cli(&["op", "show", &id.to_string(), "--json"]));
        assert_eq!(
            shown["changes"].as_array().map(Vec::len),
            Some(0),
            "{shown}"
        );
    }
    let out = ok(m.cli(&["op", "show", "2"]));
    assert!(out.contains("turn 2 became current after turn 1"), "{out}");
    let out = ok(m.cli(&["op", "show", &format!("#{partial}"), "-p"]));
    assert!(out.contains("modified  f\n--- a/f\n+++ b/f\n"), "{out}");
    assert!(out.contains("-three\n+one\n"), "{out}");
    let shown = json(m.cli(&["op", "show", &rewind.to_string(), "--json"]));
    let paths: Vec<(&str, &str)> = shown["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or("?"),
                c["change"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    // Back to the start of turn 2: g, made and removed since, is no change.
    for want in [
        ("f", "modified"),
        ("link", "deleted"),
        ("e", "deleted"),
        ("e/z", "deleted"),
        ("k", "modified"),
        ("k", "mode"),
        ("d/x", "created"),
        ("café", "deleted"),
    ] {
        assert!(paths.contains(&want), "{want:?} not in {paths:?}");
    }
    assert_eq!(shown["kind"], "rewind");
    let out = ok(m.cli(&["op", "show", &undo.to_string()]));
    assert!(out.contains("created   link"), "{out}");
    assert!(out.contains("deleted   h"), "{out}");
    // A name that needs quoting is quoted as git quotes it.
    let out = ok(m.cli(&["op", "show", &rewind.to_string()]));
    assert!(out.contains("deleted   \"caf\\303\\251\"\n"), "{out}");
}

/// `op restore ID`: the tree as just after #ID; `undo` gives back the tree before; `redo` the
/// restored one; then `undo` again, so the next case starts from the same folder.
fn restores_exactly(m: &Mounted, id: u64, expected: &Tree) {
    let before = tree(&m.dir, false);
    let turns = turns_view(m);
    let ops = newest(m);
    let preview = ok(m.cli(&["op", "restore", &id.to_string(), "--dry-run"]));
    assert!(preview.contains("dry run, nothing changed"), "{preview}");
    assert_same_tree(&before, &tree(&m.dir, false));
    let report = json(m.cli(&["op", "restore", &format!("#{id}"), "--yes", "--json"]));
    assert_eq!(
        report["failed"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    assert_same_tree(expected, &tree(&m.dir, false));
    assert_eq!(turns_view(m), turns, "op restore #{id} changed the turns");
    let log = json(m.cli(&["op", "log", "--json"]));
    assert_eq!(log[0]["id"].as_u64(), Some(ops + 1));
    assert_eq!(log[0]["kind"], "restore_op");
    assert_eq!(log[0]["next_undo"], true);
    ok(m.cli(&["undo", "--yes"]));
    assert_same_tree(&before, &tree(&m.dir, false));
    assert_eq!(turns_view(m), turns);
    ok(m.cli(&["redo", "--yes"]));
    assert_same_tree(expected, &tree(&m.dir, false));
    ok(m.cli(&["undo", "--yes"]));
    assert_same_tree(&before, &tree(&m.dir, false));
}

fn op_show_and_op_restore_give_each_operations_folder() {
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "one\n").expect("f");
        std::fs::write(d.join("k"), "keep\n").expect("k");
        std::fs::hard_link(d.join("k"), d.join("k2")).expect("k2");
        std::fs::create_dir(d.join("d")).expect("d");
        std::fs::write(d.join("d/x"), "x\n").expect("d/x");
    });
    let (snaps, ids) = history(&m);
    shows(&m, ids);
    for (id, expected) in &snaps {
        restores_exactly(&m, *id, expected);
    }
    // Refused in one line, nothing changed: no such operation, one that changed no path.
    let now = tree(&m.dir, false);
    let o = m.cli(&["op", "restore", "999", "--yes"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("operation #999 does not exist"),
        "{}",
        text(&o)
    );
    ok(m.cli(&["turn", "--label", "2", "renamed"]));
    let relabel = newest(&m).to_string();
    let o = m.cli(&["op", "restore", &relabel, "--yes"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("changed no path"), "{}", text(&o));
    let out = ok(m.cli(&["op", "show", &relabel]));
    assert!(out.contains("turn 2 labelled \"renamed\""), "{out}");
    assert_same_tree(&now, &tree(&m.dir, false));
}

/// On a terminal `op restore` shows the rewind's preview and asks: "n" changes nothing (exit
/// 1), "y" restores; the question lists what it will restore and delete.
#[test]
fn on_a_terminal_op_restore_shows_the_preview_and_asks() {
    if !common::require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "start\n").expect("f"));
    let start = tree(&m.dir, false);
    ok(m.cli(&["turn", "2"]));
    m.sh("echo agent > f; echo new > new");
    let agent = tree(&m.dir, false);
    let (shown, code) = common::on_a_terminal("n", &["op", "restore", "1"], &m.dir);
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("delete   new"), "{shown}");
    assert!(shown.contains("restore  f"), "{shown}");
    assert!(shown.contains("Proceed? [y/N]"), "{shown}");
    assert!(shown.contains("cancelled: nothing changed"), "{shown}");
    assert_same_tree(&agent, &tree(&m.dir, false));
    let (shown, code) = common::on_a_terminal("y", &["op", "restore", "#1"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert_same_tree(&start, &tree(&m.dir, false));
    // The turns stay: turn 2 is current.
    assert_eq!(json(m.cli(&["status", "--json"]))["turn"], 2);
}

on_both_mounts!(
    /// On root's mount.
    op_show_and_op_restore_give_each_operations_folder_on_roots_mount,
    op_show_and_op_restore_give_each_operations_folder_on_a_users_mount,
    op_show_and_op_restore_give_each_operations_folder
);

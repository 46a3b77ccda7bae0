//! The operation log on real mounts with real programs: turns, rewinds and partial rewinds made
//! by git, `sed -i`, `rm -rf`, `ln`, `chmod` and `setfattr`-like xattr writes, then `undo` and
//! `redo` any number of times, each compared byte for byte (with modes, hard links and user
//! xattrs) with a snapshot of the tree taken at the moment it must give back.

mod common;

use common::{Mounted, Node, assert_same_tree, require_fuse, require_program, tree};
use std::collections::BTreeMap;
use std::path::Path;

/// The tree with the user xattrs of every path.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    nodes: BTreeMap<String, Node>,
    xattrs: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

fn snapshot(root: &Path) -> Snapshot {
    let nodes = tree(root, true);
    let mut xattrs = BTreeMap::new();
    for path in nodes.keys() {
        let p = root.join(path);
        let mut attrs = BTreeMap::new();
        if let Ok(names) = xattr::list(&p) {
            for name in names {
                let name = name.to_string_lossy().into_owned();
                if !name.starts_with("user.") {
                    continue;
                }
                if let Ok(Some(v)) = xattr::get(&p, &name) {
                    attrs.insert(name, v);
                }
            }
        }
        if !attrs.is_empty() {
            xattrs.insert(path.clone(), attrs);
        }
    }
    Snapshot { nodes, xattrs }
}

fn assert_snapshot(what: &str, want: &Snapshot, got: &Snapshot) {
    eprintln!("checking: {what}");
    assert_same_tree(&want.nodes, &got.nodes);
    assert_eq!(want.xattrs, got.xattrs, "{what}: user xattrs differ");
}

/// Runs the CLI on `m` (its `--dir` before any `--`); panics unless it succeeds.
fn ok(m: &Mounted, args: &[&str]) -> String {
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let out = std::process::Command::new(common::bin())
        .args(&args[..split])
        .arg("--dir")
        .arg(&m.dir)
        .args(&args[split..])
        .output()
        .expect("run cli");
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn op_log(m: &Mounted) -> Vec<serde_json::Value> {
    let text = ok(m, &["op", "log", "--json"]);
    serde_json::from_str(&text).expect("op log --json")
}

/// A project with history: git, files edited by `sed -i`, a tree removed with `rm -rf`, hard
/// links, modes and xattrs, over three turns.
fn project(m: &Mounted) -> Vec<Snapshot> {
    let mut at_turn_start = vec![snapshot(&m.dir)];
    m.sh(
        "git init -q . && mkdir -p src docs && printf 'fn main() {}\\n' > src/main.rs \
         && printf 'hello\\nworld\\n' > docs/a.md && ln docs/a.md docs/link.md \
         && git add -A && git commit -qm one",
    );
    xattr::set(m.path("docs/a.md"), "user.tag", b"first").expect("setxattr");
    m.turn(2);
    at_turn_start.push(snapshot(&m.dir));
    m.sh(
        "sed -i 's/world/there/' docs/a.md && chmod 600 src/main.rs && mkdir -p gen/x \
         && printf 'out' > gen/x/o.txt && git add -A && git commit -qm two",
    );
    m.turn(3);
    at_turn_start.push(snapshot(&m.dir));
    m.sh("rm -rf docs gen && printf 'new\\n' > src/lib.rs && git checkout -q -b feature");
    xattr::set(m.path("src/lib.rs"), "user.tag", b"third").expect("setxattr");
    at_turn_start
}

#[test]
fn undo_and_redo_any_depth_give_back_every_state_exactly() {
    if !require_fuse() || !require_program("git") {
        return;
    }
    let m = Mounted::new();
    let starts = project(&m);
    // Each operation, with the tree just before it.
    let mut before_ops: Vec<Snapshot> = Vec::new();

    before_ops.push(snapshot(&m.dir));
    ok(&m, &["rewind", "2", "-y"]);
    assert_snapshot("rewind 2", &starts[1], &snapshot(&m.dir));
    m.sh("printf 'after rewind\\n' >> src/main.rs && rm -f docs/link.md");

    before_ops.push(snapshot(&m.dir));
    // docs/ did not exist when turn 1 began: the partial rewind removes it.
    ok(&m, &["rewind", "1", "-y", "--", "docs"]);
    assert!(!m.path("docs").exists());
    m.sh("mkdir docs && printf 'edit after partial\\n' > docs/a.md");

    before_ops.push(snapshot(&m.dir));
    ok(&m, &["turn", "4"]);
    m.sh("printf 'turn four\\n' > four.txt");
    let end = snapshot(&m.dir);

    // Undo three times: the turn switch (nothing changes), then the partial rewind, then the
    // rewind, each giving back the folder as it was just before it.
    let mut after_undo = Vec::new();
    let u = ok(&m, &["undo"]);
    assert!(u.contains("undo of #"), "{u}");
    assert_snapshot("undo of the turn switch", &end, &snapshot(&m.dir));
    assert_eq!(ok(&m, &["turn"]).trim(), "2");
    after_undo.push(snapshot(&m.dir));
    ok(&m, &["undo"]);
    assert_snapshot(
        "undo of the partial rewind",
        &before_ops[1],
        &snapshot(&m.dir),
    );
    after_undo.push(snapshot(&m.dir));
    // The dry run previews exactly what the undo then does.
    let preview: serde_json::Value =
        serde_json::from_str(&ok(&m, &["undo", "--dry-run", "--json"])).expect("json");
    let done: serde_json::Value = serde_json::from_str(&ok(&m, &["undo", "--json"])).expect("json");
    assert_eq!(preview["restored"], done["restored"]);
    assert_eq!(preview["deleted"], done["deleted"]);
    assert_snapshot("undo of the rewind", &before_ops[0], &snapshot(&m.dir));
    assert_eq!(ok(&m, &["turn"]).trim(), "3");
    let log = op_log(&m);
    assert_eq!(log[0]["kind"], "undo");
    assert!(
        log.iter().filter(|o| o["state"] == "undone").count() == 3,
        "{log:?}"
    );

    // Redo three times: back to each state just before its undo.
    ok(&m, &["redo"]);
    assert_snapshot("redo of the rewind", &after_undo[1], &snapshot(&m.dir));
    ok(&m, &["redo"]);
    assert_snapshot(
        "redo of the partial rewind",
        &after_undo[0],
        &snapshot(&m.dir),
    );
    ok(&m, &["redo"]);
    assert_snapshot("redo of the turn switch", &end, &snapshot(&m.dir));
    assert_eq!(ok(&m, &["turn"]).trim(), "4");
    let out = m.cli(&["redo"]);
    assert!(!out.status.success(), "nothing left to redo");

    // The history is whole again: a rewind to each turn still gives its start exactly.
    ok(&m, &["rewind", "1", "-y"]);
    assert_snapshot(
        "rewind 1 after undo and redo",
        &starts[0],
        &snapshot(&m.dir),
    );
    ok(&m, &["undo"]);
    assert_snapshot("undo of rewind 1", &end, &snapshot(&m.dir));
}

#[test]
fn a_new_operation_clears_what_redo_could_do() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("printf one > a");
    m.turn(2);
    m.sh("printf two > a");
    ok(&m, &["rewind", "1", "-y"]);
    ok(&m, &["undo"]);
    assert_eq!(std::fs::read(m.path("a")).expect("read"), b"two");
    ok(&m, &["turn", "3"]);
    let out = m.cli(&["redo"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to redo"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn relabel_is_an_operation_and_rewound_turns_stay_in_the_log() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("printf one > a");
    ok(&m, &["turn", "2", "-m", "first try"]);
    m.sh("printf two > a");
    ok(&m, &["turn", "3"]);
    ok(&m, &["turn", "--label", "3", "second try"]);
    m.sh("printf three > a");
    let log: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&m, &["log", "--json"])).expect("log");
    assert_eq!(log[0]["label"], "mounted");
    assert_eq!(log[2]["label"], "second try");
    ok(&m, &["rewind", "2", "-y"]);
    let log: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&m, &["log", "--json"])).expect("log");
    let rewound: Vec<&serde_json::Value> =
        log.iter().filter(|r| r["rewound_by"].is_u64()).collect();
    // Turn 2's own work (retired with it) and turn 3, each as it stood when rewound.
    assert_eq!(rewound.len(), 2, "{log:?}");
    assert_eq!(rewound[0]["turn"], 2);
    assert_eq!(rewound[0]["label"], "first try");
    assert_eq!(rewound[0]["modified"], 1, "turn 2 as it stood when rewound");
    assert_eq!(rewound[1]["turn"], 3);
    assert_eq!(rewound[1]["label"], "second try");
    assert_eq!(rewound[1]["modified"], 1, "turn 3 as it stood when rewound");
    let text = ok(&m, &["log"]);
    assert!(text.contains("rewound #"), "{text}");
    // Undo the rewind, then the relabel.
    ok(&m, &["undo"]);
    ok(&m, &["undo"]);
    let log: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&m, &["log", "--json"])).expect("log");
    assert!(log[2]["label"].is_null(), "{log:?}");
    let ops = op_log(&m);
    assert!(
        ops.iter()
            .any(|o| o["kind"] == "relabel" && o["state"] == "undone"),
        "{ops:?}"
    );
    assert_eq!(std::fs::read(m.path("a")).expect("read"), b"three");
}

#[test]
fn rewind_undo_is_undo_of_a_partial_rewind_too() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("mkdir d && printf one > d/f && printf keep > k");
    m.turn(2);
    m.sh("printf two > d/f && printf new > d/g && printf k2 > k");
    let before = snapshot(&m.dir);
    ok(&m, &["rewind", "2", "-y", "--", "d"]);
    assert_eq!(std::fs::read(m.path("d/f")).expect("read"), b"one");
    assert!(!m.path("d/g").exists());
    assert_eq!(std::fs::read(m.path("k")).expect("read"), b"k2");
    let out = ok(&m, &["rewind", "--undo"]);
    assert!(out.contains("undid the last rewind"), "{out}");
    assert_snapshot(
        "rewind --undo of a partial rewind",
        &before,
        &snapshot(&m.dir),
    );
}

#[test]
fn prune_says_what_it_made_unrecoverable() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("printf one > a");
    m.turn(2);
    m.sh("printf two > a");
    m.turn(3);
    m.sh("printf three > a");
    ok(&m, &["rewind", "2", "-y"]);
    let r: serde_json::Value =
        serde_json::from_str(&ok(&m, &["prune", "--keep-turns", "1", "--yes", "--json"]))
            .expect("json");
    assert_eq!(r["dropped_turns"], serde_json::json!([1]));
    assert_eq!(r["lost_rewound_turns"], serde_json::json!([3]));
    assert!(
        r["lost_ops"].as_array().is_some_and(|a| !a.is_empty()),
        "{r}"
    );
    let out = m.cli(&["undo"]);
    assert!(!out.status.success(), "nothing to undo after a prune");
    let ops = op_log(&m);
    assert_eq!(ops[0]["kind"], "prune");
    assert!(
        ops.len() > 1,
        "the operations before the prune stay listed: {ops:?}"
    );
    let fsck = ok(&m, &["fsck"]);
    assert!(fsck.contains(" 0 errors"), "{fsck}");
}

//! The command-line contract: refusals, dry runs, JSON reports, undo, offline rewinds.

mod common;
use common::{Mounted, assert_same_tree, bin, require_fuse, transcript, tree};
use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run ckpt-mount")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn mounting_root_home_or_a_mounted_folder_is_refused() {
    if !require_fuse() {
        return;
    }
    let mut said = String::new();
    let o = run(&["mount", "/"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).lines().count(),
        1,
        "one clear line: {}",
        stderr(&o)
    );
    said += &transcript(&["mount", "/"], &o, &[]);

    let home = tempfile::tempdir().expect("tempdir");
    let home_s = home.path().display().to_string();
    let o = Command::new(bin())
        .args(["mount"])
        .arg(home.path())
        .env("HOME", home.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    said += &transcript(&["mount", &home_s], &o, &[(&home_s, "[HOME]")]);

    let m = Mounted::new();
    let dir = m.dir.display().to_string();
    let o = Command::new(bin())
        .arg("mount")
        .arg(&m.dir)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    said += &transcript(&["mount", &dir], &o, &[(&dir, "[DIR]")]);

    let o = run(&["mount", "/nonexistent/ckpt-folder"]);
    assert_eq!(o.status.code(), Some(1));
    said += &transcript(&["mount", "/nonexistent/ckpt-folder"], &o, &[]);
    insta::assert_snapshot!(said);
}

#[test]
fn bad_usage_exits_2_and_failures_exit_1() {
    let mut said = String::new();
    for args in [
        &[][..],
        &["rewind", "abc"],
        &["turn", "-5"],
        &["frobnicate"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        said += &transcript(args, &o, &[]);
    }
    let empty = tempfile::tempdir().expect("tempdir");
    let dir = empty.path().display().to_string();
    let o = Command::new(bin())
        .args(["status", "--dir"])
        .arg(empty.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    said += &transcript(&["status", "--dir", &dir], &o, &[(&dir, "[DIR]")]);
    let o = run(&["unmount", "/tmp"]);
    assert_eq!(o.status.code(), Some(1));
    said += &transcript(&["unmount", "/tmp"], &o, &[]);
    insta::assert_snapshot!(said);
}

#[test]
fn dry_run_changes_nothing_and_json_reports_paths() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("keep"), "v1\n").expect("write"));
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("echo v2 > keep; echo new > created");
    let after = tree(&m.dir, false);
    let o = m.cli(&["rewind", "2", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = m.dir.display().to_string();
    insta::assert_snapshot!(transcript(
        &["rewind", "2", "--dry-run", "--dir", &dir],
        &o,
        &[(&dir, "[DIR]")]
    ));
    assert_same_tree(&after, &tree(&m.dir, false));

    let o = m.cli(&["rewind", "2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json report");
    assert_eq!(v["to"], 2);
    assert_eq!(v["restored"], serde_json::json!(["keep"]));
    assert_eq!(v["deleted"], serde_json::json!(["created"]));
    assert_eq!(v["failed"], serde_json::json!([]));
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn undo_brings_back_the_state_before_the_last_rewind() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "turn one\n").expect("write"));
    m.turn(2);
    m.sh("echo agent > f; mkdir -p out/deep; echo built > out/deep/x; ln -s f link");
    let agent_state = tree(&m.dir, false);
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "turn one\n"
    );
    let o = m.cli(&["rewind", "--undo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_tree(&agent_state, &tree(&m.dir, false));
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("read"),
        "2\n"
    );
    // The undone rewind's turn is back: rewinding to 2 again works and is exact.
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "turn one\n"
    );
    assert!(!m.path("out").exists());
}

#[test]
fn rewind_works_on_an_unmounted_folder() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| {
        std::fs::create_dir(d.join("src")).expect("mkdir");
        std::fs::write(d.join("src/main.rs"), "fn main() {}\n").expect("write");
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("rm -rf src; echo oops > README");
    m.unmount();
    let o = m.cli(&["rewind", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_tree(&before, &tree(&m.dir, false));
    let o = m.cli(&["turn"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2");
    m.remount();
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("read"),
        "2\n"
    );
}

#[test]
fn status_and_log_report_turns_programs_and_counts() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("a"), "a\n").expect("write");
        std::fs::write(d.join("b"), "b\n").expect("write");
    });
    let o = m.cli(&["turn", "2", "-m", "first edit"]);
    assert!(o.status.success(), "{}", stderr(&o));
    m.sh("sed -i s/a/A/ a; rm b; echo c > c");
    let o = m.cli(&["log", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let t2 = rows
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["turn"] == 2)
        .expect("turn 2 row")
        .clone();
    assert_eq!(t2["label"], "first edit");
    assert_eq!(t2["created"], 1);
    assert_eq!(t2["deleted"], 1);
    assert!(t2["modified"].as_u64().expect("modified") >= 1);
    let programs: Vec<String> = t2["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .map(|p| p.as_str().unwrap_or("").to_string())
        .collect();
    assert!(programs.iter().any(|p| p == "sed"), "{programs:?}");
    assert!(programs.iter().any(|p| p == "rm"), "{programs:?}");
    let o = m.cli(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(st["mounted"], true);
    assert_eq!(st["turn"], 2);
    assert!(st["captures_this_turn"].as_u64().expect("captures") >= 3);
    assert!(st["pid"].as_u64().is_some());
}

#[test]
fn rewinding_only_some_paths_leaves_the_rest_and_the_history() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("a"), "a1\n").expect("write");
        std::fs::write(d.join("b"), "b1\n").expect("write");
        std::fs::create_dir(d.join("d")).expect("mkdir");
        std::fs::write(d.join("d/x"), "x1\n").expect("write");
    });
    m.turn(2);
    let turn2 = tree(&m.dir, false);
    m.sh("echo a2 > a; echo b2 > b; rm -r d; echo c > c");
    m.turn(3);
    let turn3 = tree(&m.dir, false);
    let o = Command::new(bin())
        .args(["rewind", "2", "--dir"])
        .arg(&m.dir)
        .args(["--", "a", "d/x"])
        .output()
        .expect("run");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(m.path("a")).expect("a"), "a1\n");
    assert_eq!(std::fs::read_to_string(m.path("d/x")).expect("d/x"), "x1\n");
    assert_eq!(
        std::fs::read_to_string(m.path("b")).expect("b"),
        "b2\n",
        "b was not asked for"
    );
    assert!(m.path("c").exists(), "c was not asked for");
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn"),
        "3\n"
    );
    // The partial rewind was a change of turn 3: rewinding turn 3 undoes it.
    m.rewind(3);
    assert_same_tree(&turn3, &tree(&m.dir, false));
    // And the whole history is still there.
    m.rewind(2);
    assert_same_tree(&turn2, &tree(&m.dir, false));
}

#[test]
fn a_partial_rewind_over_a_file_bigger_than_max_blob_records_it_as_skipped() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with_args(
        |d| std::fs::write(d.join("f"), "small\n").expect("write"),
        &["--max-blob", "1K"],
    );
    m.turn(2);
    m.sh("head -c 4096 /dev/zero | tr '\\0' Z > f");
    m.turn(3);
    let o = Command::new(bin())
        .args(["rewind", "2", "--dir"])
        .arg(&m.dir)
        .args(["--", "f"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("f"), "small\n");
    // What the partial rewind overwrote was captured for turn 3 under the same limit: not
    // stored, recorded as skipped, and a rewind of turn 3 says so instead of succeeding.
    let o = m.cli(&["rewind", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let dir = m.dir.display().to_string();
    insta::assert_snapshot!(transcript(
        &["rewind", "3", "--dir", &dir],
        &o,
        &[(&dir, "[DIR]")]
    ));
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("f"), "small\n");
    m.unmount();
    let big = vec![b'Z'; 4096];
    for (name, bytes) in common::store_bytes(&m.dir) {
        assert!(
            !bytes.windows(big.len()).any(|w| w == big.as_slice()),
            "the 4 KiB file was stored in {name}"
        );
    }
}

#[test]
fn completions_and_man_page_come_from_the_cli_definitions() {
    let o = run(&["completions", "bash"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for sub in [
        "mount", "unmount", "turn", "rewind", "log", "status", "diff", "run", "prune", "fsck",
    ] {
        assert!(text.contains(sub), "completion lacks {sub}");
    }
    let o = run(&["man"]);
    assert!(o.status.success());
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.contains(".TH ckpt-mount-rewind"), "no page for rewind");
    // The examples of a page are lines of their own in its EXAMPLES section (tests/man_page.rs
    // renders the pages).
    assert!(
        page.contains(".SH EXAMPLES") && page.contains("\nckpt\\-mount rewind 2 \\-\\-dry\\-run\n"),
        "rewind page lacks its example"
    );
    // The binary prints what clap renders (each help text is a unit test of its own).
    let help = run(&["diff", "--help"]);
    assert!(help.status.success());
    insta::assert_snapshot!(transcript(&["diff", "--help"], &help, &[]));
}

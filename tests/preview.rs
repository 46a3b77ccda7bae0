//! What a user sees before and after a rewind: `rewind --dry-run` previews exactly what the run
//! then does to the folder as it is (not the journal's list of every path a turn touched), on a
//! terminal `rewind` shows that preview and asks, captures skipped over `--max-blob` show in
//! `status` and `log` when they happen, and `status --log` prints the daemon's log.

mod common;
use common::output_text as text;
use common::{Mounted, assert_same_tree, bin, on_a_terminal, require_fuse, transcript, tree};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// `ckpt-mount ARGS --dir DIR [-- PATHS]`.
fn cli(dir: &Path, args: &[&str], paths: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.args(args).arg("--dir").arg(dir);
    if !paths.is_empty() {
        c.arg("--").args(paths);
    }
    c.output().expect("run ckpt-mount")
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// The preview and the run that followed it list the same paths and the same counts.
fn assert_preview_was_exact(preview: &Value, real: &Value) {
    assert_eq!(preview["dry_run"], true, "{preview}");
    assert_eq!(real["dry_run"], false, "{real}");
    for key in [
        "restored", "deleted", "failed", "summary", "to", "undo", "only",
    ] {
        assert_eq!(
            preview[key], real[key],
            "{key} differs\npreview: {preview:#}\nrun: {real:#}"
        );
    }
}

/// Edits `file` with vim as a user would (it makes `.FILE.swp` and `.FILE.swx` beside it and
/// removes them); a plain create and remove of a swap file where vim is not installed.
fn edit_with_vim(m: &Mounted, file: &str) {
    let vim = Command::new("vim").arg("--version").output();
    if vim.is_ok_and(|o| o.status.success()) {
        m.sh(&format!(
            "HOME=/nonexistent vim -u NONE -i NONE -N -es -c 's/$/ (edited)/' -c wq {file} </dev/null"
        ));
    } else {
        eprintln!("vim is not installed: its swap file is made by hand");
        m.sh(&format!(
            "echo swap > .{file}.swp && echo ' (edited)' >> {file} && rm .{file}.swp"
        ));
    }
}

#[test]
fn a_dry_run_lists_only_what_the_run_then_changes() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("a.txt"), "one\ntwo\n").expect("write");
        std::fs::write(d.join("same.txt"), "same\n").expect("write");
        std::fs::write(d.join("notes.txt"), "notes\n").expect("write");
        std::fs::create_dir(d.join("src")).expect("mkdir");
        std::fs::write(d.join("src/main.rs"), "fn main() {}\n").expect("write");
    });
    m.sh("git init -q && git add -A && git commit -qm init");
    m.turn(2);
    let turn2 = tree(&m.dir, true);
    // What an agent's turn leaves behind and what it only passes through: a download made and
    // removed, sed's temp file, vim's swap files, git's index.lock, a scratch directory, and a
    // file rewritten with the bytes it had.
    m.sh("head -c 300000 /dev/urandom > big.bin && rm big.bin");
    m.sh("sed -i s/one/ONE/ a.txt");
    edit_with_vim(&m, "notes.txt");
    m.sh("git add a.txt notes.txt");
    m.sh("mkdir scratch && echo x > scratch/f && rm -r scratch");
    m.sh("echo other > same.txt && echo same > same.txt");
    m.sh("echo new > new.txt && echo 'fn helper() {}' > src/lib.rs");

    let o = m.cli(&["rewind", "2", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let preview = json(&o);
    let deleted = strings(&preview["deleted"]);
    let restored = strings(&preview["restored"]);
    let mut want_deleted = vec!["new.txt", "src/lib.rs"];
    want_deleted.sort_unstable();
    let mut got_deleted: Vec<&str> = deleted
        .iter()
        .map(String::as_str)
        .filter(|p| !p.starts_with(".git/objects/"))
        .collect();
    got_deleted.sort_unstable();
    assert_eq!(got_deleted, want_deleted, "{preview:#}");
    for p in &deleted {
        assert!(
            m.path(p).symlink_metadata().is_ok(),
            "the preview deletes {p}, which does not exist"
        );
    }
    for p in ["a.txt", "notes.txt", ".git/index"] {
        assert!(restored.contains(&p.to_string()), "{p}: {preview:#}");
    }
    for p in deleted.iter().chain(&restored) {
        assert!(
            !p.starts_with("big.bin")
                && !p.contains(".swp")
                && !p.contains(".swx")
                && !p.contains("/sed")
                && !p.starts_with("sed")
                && !p.starts_with("scratch")
                && p != ".git/index.lock"
                && p != "same.txt",
            "the preview lists {p}, which the run leaves as it is: {preview:#}"
        );
    }
    assert!(
        preview["summary"]["unchanged"].as_u64().expect("unchanged") >= 6,
        "big.bin, sed's and vim's files, index.lock, scratch and same.txt are unchanged: {preview:#}"
    );
    assert_eq!(preview["summary"]["failed"], 0);

    // The text form lists the same paths, and the tree is untouched.
    let before = tree(&m.dir, true);
    let o = m.cli(&["rewind", "2", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let listed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("delete   "))
        .collect();
    assert_eq!(
        listed,
        deleted.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(
        out.lines().last().is_some_and(|l| l.starts_with(
            "dry run, nothing changed: rewinding to the start of turn 2 would restore"
        )),
        "{out}"
    );
    assert_same_tree(&before, &tree(&m.dir, true));

    let o = m.cli(&["rewind", "2", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));
    assert_same_tree(&turn2, &tree(&m.dir, true));

    // The undo's preview says it undoes the last rewind, and is exact too.
    let o = m.cli(&["rewind", "--undo", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("dry run, nothing changed: undoing the last rewind would"),
        "{out}"
    );
    assert!(!out.contains("start of turn"), "{out}");
    let o = m.cli(&["rewind", "--undo", "--dry-run", "--json"]);
    let preview = json(&o);
    assert_eq!(preview["undo"], true);
    let o = m.cli(&["rewind", "--undo", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));
    assert_same_tree(&before, &tree(&m.dir, true));
}

#[test]
fn offline_and_partial_previews_match_their_runs() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| {
        std::fs::write(d.join("a"), "a\n").expect("write");
        std::fs::create_dir(d.join("d")).expect("mkdir");
        std::fs::write(d.join("d/x"), "x\n").expect("write");
        std::fs::write(d.join("d/y"), "y\n").expect("write");
    });
    m.turn(2);
    let turn2 = tree(&m.dir, false);
    m.sh("echo X > d/x && echo t > d/tmp && rm d/tmp && sed -i s/y/Y/ d/y && sed -i s/Y/y/ d/y");
    m.sh("sed -i s/a/A/ a && echo n > d/new");
    m.turn(3);
    m.unmount();

    // Only d, on the unmounted folder.
    let o = cli(&m.dir, &["rewind", "2", "--dry-run", "--json"], &["d"]);
    assert!(o.status.success(), "{}", text(&o));
    let preview = json(&o);
    assert_eq!(preview["only"], serde_json::json!(["d"]));
    assert_eq!(preview["deleted"], serde_json::json!(["d/new"]));
    assert_eq!(
        preview["restored"],
        serde_json::json!(["d/x"]),
        "d/y holds its bytes again (sed put them back), d/tmp is gone: {preview:#}"
    );
    let o = cli(&m.dir, &["rewind", "2", "--dry-run"], &["d"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("rewinding d to the start of turn 2 would restore 1 path (2 B to write) and delete 1 path"),
        "{out}"
    );
    let o = cli(&m.dir, &["rewind", "2", "--json"], &["d"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));

    // The whole folder.
    let o = cli(&m.dir, &["rewind", "2", "--dry-run", "--json"], &[]);
    let preview = json(&o);
    assert_eq!(preview["restored"], serde_json::json!(["a"]), "{preview:#}");
    let o = cli(&m.dir, &["rewind", "2", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));
    assert_same_tree(&turn2, &tree(&m.dir, false));

    // And its undo.
    let o = cli(&m.dir, &["rewind", "--undo", "--dry-run", "--json"], &[]);
    let preview = json(&o);
    let o = cli(&m.dir, &["rewind", "--undo", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));
    m.remount();
}

#[test]
fn a_dry_run_names_what_cannot_be_restored_and_exits_1() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with_args(
        |d| {
            std::fs::write(d.join("big.bin"), vec![b'B'; 4096]).expect("write");
            std::fs::write(d.join("small"), "small\n").expect("write");
            drop(std::os::unix::net::UnixListener::bind(d.join("sock")).expect("socket"));
        },
        &["--max-blob", "1K"],
    );
    m.turn(2);
    m.sh("echo changed > big.bin && rm sock && echo changed > small");
    // Status said so when it happened.
    let o = m.cli(&["status"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(
        warnings,
        [
            "warning:  1 file over --max-blob was not captured in turn 2: big.bin (4.0 KiB); a rewind cannot restore it",
            "warning:  1 socket was not captured in turn 2: sock; a rewind cannot restore it",
        ],
        "{out}"
    );
    let o = m.cli(&["rewind", "2", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let dir = m.dir.display().to_string();
    insta::assert_snapshot!(transcript(
        &["rewind", "2", "--dry-run", "--dir", &dir],
        &o,
        &[(&dir, "[DIR]")]
    ));
    let o = m.cli(&["rewind", "2", "--dry-run", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let preview = json(&o);
    let failed: Vec<(String, String)> = preview["failed"]
        .as_array()
        .expect("failed")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_string(),
                f["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect();
    assert_eq!(failed.len(), 2, "{preview:#}");
    assert!(
        failed
            .iter()
            .any(|(p, r)| p == "big.bin" && r.contains("--max-blob"))
    );
    assert!(
        failed
            .iter()
            .any(|(p, r)| p == "sock" && r.contains("socket"))
    );
    assert_eq!(preview["summary"]["failed"], 2);

    let o = m.cli(&["rewind", "2", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_preview_was_exact(&preview, &json(&o));
    assert_eq!(
        std::fs::read_to_string(m.path("small")).expect("small"),
        "small\n"
    );
}

#[test]
fn a_capture_over_max_blob_shows_in_status_and_log_when_it_happens() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with_args(
        |d| std::fs::write(d.join("big.bin"), vec![b'B'; 4096]).expect("write"),
        &["--max-blob", "1K"],
    );
    m.turn(2);
    m.sh("echo small > small");
    m.turn(3);
    m.sh("echo overwritten > big.bin");
    let warning = "warning:  1 file over --max-blob was not captured in turn 3: big.bin (4.0 KiB); a rewind cannot restore it";
    let o = m.cli(&["status"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.lines().any(|l| l == warning), "{out}");
    let o = m.cli(&["status", "--json"]);
    let st = json(&o);
    assert_eq!(
        st["skipped"].as_array().expect("skipped").len(),
        1,
        "{st:#}"
    );
    assert_eq!(st["skipped"][0]["path"], "big.bin");
    assert_eq!(st["skipped"][0]["turn"], 3);
    assert_eq!(st["skipped"][0]["size"], 4096);
    assert_eq!(st["skipped"][0]["over_max_blob"], true);

    let o = m.cli(&["log"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    let row = lines
        .iter()
        .position(|l| l.trim_start().starts_with("3 "))
        .unwrap_or_else(|| panic!("no row for turn 3: {out}"));
    assert!(
        lines.get(row + 1).is_some_and(|l| l.trim_start()
            == "! 1 file over --max-blob was not captured: big.bin (4.0 KiB); a rewind cannot restore it"),
        "{out}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("!")).count(),
        1,
        "turn 2 has no marker: {out}"
    );
    let o = m.cli(&["log", "--json"]);
    let rows = json(&o);
    let skipped_in = |t: u64| {
        rows.as_array()
            .expect("rows")
            .iter()
            .find(|r| r["turn"] == t)
            .map(|r| r["skipped"].as_array().expect("skipped").len())
    };
    assert_eq!(skipped_in(2), Some(0));
    assert_eq!(skipped_in(3), Some(1));

    // The same from the store itself once unmounted.
    m.unmount();
    let o = m.cli(&["status"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.lines().any(|l| l == warning), "{out}");
    m.remount();
}

#[test]
fn status_log_prints_the_end_of_the_daemons_log_mounted_or_not() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::new();
    m.turn(2);
    m.turn(3);
    let o = m.cli(&["status", "--log", "-n", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].contains("turn 2 begins"), "{out}");
    assert!(lines[1].contains("turn 3 begins"), "{out}");
    let o = m.cli(&["status", "--log"]);
    let all = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        all.lines().count() > 2 && all.lines().count() <= 50,
        "{all}"
    );
    assert!(all.contains("mounted"), "{all}");
    let o = m.cli(&["status", "--log", "--json"]);
    let v = json(&o);
    assert_eq!(v["exists"], true);
    assert!(v["lines"].as_array().expect("lines").len() <= 50);

    m.unmount();
    let o = m.cli(&["status", "--log", "-n", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("unmounted"), "{out}");
    m.remount();

    let o = Command::new(bin())
        .args(["status", "-n", "5"])
        .arg("--dir")
        .arg(&m.dir)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "-n needs --log: {}", text(&o));
}

#[test]
fn on_a_terminal_rewind_shows_the_preview_and_asks() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "start\n").expect("write"));
    m.turn(2);
    let turn2 = tree(&m.dir, false);
    m.sh("echo agent > f && echo tmp > t && rm t && echo new > new");
    let agent = tree(&m.dir, false);
    let dir = m.dir.display().to_string();

    // "n": nothing changes, exit 1.
    let (shown, code) = on_a_terminal("n", &["rewind", "2"], &m.dir);
    assert_eq!(code, Some(1), "{shown}");
    insta::assert_snapshot!(shown.replace(&dir, "[DIR]"));
    assert_same_tree(&agent, &tree(&m.dir, false));

    // The current turn, named (a bare rewind opens the picker: tests/picker.rs), asks too;
    // "y" rewinds.
    let (shown, code) = on_a_terminal("y", &["rewind", "2"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("Rewinding to the start of turn 2 will restore 1 path (6 B to write) and delete 1 path; 1 path unchanged.\nProceed? [y/N] y\n"), "{shown}");
    assert!(
        shown.contains("rewound to the start of turn 2: 1 restored, 1 deleted, 0 failed"),
        "{shown}"
    );
    assert_same_tree(&turn2, &tree(&m.dir, false));

    // --undo asks, and says what it undoes.
    let (shown, code) = on_a_terminal("yes", &["rewind", "--undo"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("Undoing the last rewind will restore 2 paths"),
        "{shown}"
    );
    assert_same_tree(&agent, &tree(&m.dir, false));

    // --yes asks nothing; nor does a rewind with nothing to change in the folder.
    let (shown, code) = on_a_terminal("n", &["rewind", "2", "--yes"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("Proceed?"), "{shown}");
    assert_same_tree(&turn2, &tree(&m.dir, false));
    let (shown, code) = on_a_terminal("n", &["rewind", "2"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("Proceed?"), "{shown}");
    assert!(
        shown.contains(
            "nothing to change in the folder: it already is as it was at the start of turn 2"
        ),
        "{shown}"
    );
    // --dry-run and --json ask nothing either.
    m.sh("echo again > f");
    for args in [
        &["rewind", "2", "--dry-run"][..],
        &["rewind", "2", "--json"],
    ] {
        let (shown, code) = on_a_terminal("n", args, &m.dir);
        assert_eq!(code, Some(0), "{args:?}: {shown}");
        assert!(!shown.contains("Proceed?"), "{args:?}: {shown}");
    }
    assert_same_tree(&turn2, &tree(&m.dir, false));
}

/// A rewind of many paths lists the first 30 on a terminal, then a count (the summary line
/// stays on screen); `--verbose` lists them all, and so does output into a pipe.
#[test]
fn on_a_terminal_a_large_rewind_lists_30_paths_and_a_count() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        for i in 0..50 {
            std::fs::write(d.join(format!("f{i:02}")), "start\n").expect("write");
        }
    });
    m.turn(2);
    let agent_edit = "for f in f*; do echo agent > $f; done; echo new > new";
    m.sh(agent_edit);
    let (shown, code) = on_a_terminal("n", &["rewind", "2", "--yes"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    // The first 30 in order (the progress bar shares the terminal, so the first listed path
    // follows its last frame on one line), none after them.
    for i in 0..30 {
        assert!(shown.contains(&format!(" f{i:02}\n")), "f{i:02}: {shown}");
    }
    for i in 30..50 {
        assert!(!shown.contains(&format!(" f{i:02}\n")), "f{i:02}: {shown}");
    }
    assert!(
        shown.contains("… and 21 more changed (--verbose lists every path)\n"),
        "{shown}"
    );
    assert!(
        shown.contains("rewound to the start of turn 2: 50 restored, 1 deleted, 0 failed"),
        "{shown}"
    );

    m.sh(agent_edit);
    let (shown, code) = on_a_terminal("n", &["rewind", "2", "--yes", "--verbose"], &m.dir);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("more changed"), "{shown}");
    for i in 0..50 {
        assert!(
            shown.contains(&format!("restored f{i:02}\n")),
            "f{i:02}: {shown}"
        );
    }
    assert!(shown.contains("deleted  new\n"), "{shown}");

    m.sh(agent_edit);
    let o = cli(&m.dir, &["rewind", "2", "--yes"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let piped = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        piped
            .lines()
            .filter(|l| l.starts_with("restored f"))
            .count(),
        50,
        "{piped}"
    );
    assert!(!piped.contains("more changed"), "{piped}");
}

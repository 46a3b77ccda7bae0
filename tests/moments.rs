//! Moments by name on real mounts, as a user types them: `-1`, `@TIME`, `/TEXT` and `N#K`
//! (a turn a rewind retired, as `log` lists it) in `rewind`, `cat`, `show`, `diff`, `restore`
//! and `.ckpt/rewind`. Reading a retired turn changes nothing (folder and operation log
//! compared before and after); a hard link written through its other name reads as it was; a
//! spec that names no turn is a usage error naming the turns there are.

mod common;
use common::output_text as text;
use common::{Mounted, tree};
use std::process::Output;

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A usage error (exit 2) whose line contains each of `words`.
fn usage_error(o: Output, words: &[&str]) {
    let said = text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    for w in words {
        assert!(said.contains(w), "{w:?} not in {said:?}");
    }
}

/// `ckpt-mount ARGS --dir FOLDER -- PATHS`.
fn with_paths(m: &Mounted, args: &[&str], paths: &[&str]) -> Output {
    std::process::Command::new(common::bin())
        .args(args)
        .arg("--dir")
        .arg(&m.dir)
        .arg("--")
        .args(paths)
        .output()
        .expect("run cli")
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("json")
}

/// The local time of Unix second `t` as `date` prints it for `@"YYYY-MM-DD HH:MM:SS"`.
fn local(m: &Mounted, t: u64) -> String {
    m.sh(&format!("date -d @{t} '+%Y-%m-%d %H:%M:%S'"))
        .trim()
        .to_string()
}

fn moments_name_turns_and_retired_work_reads_back() {
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "one\n").expect("f");
        std::fs::write(d.join("k"), "keep\n").expect("k");
        std::fs::hard_link(d.join("k"), d.join("k2")).expect("k2");
        std::fs::create_dir(d.join("d")).expect("d");
        std::fs::write(d.join("d/x"), "x\n").expect("d/x");
    });
    // A second apart, so that a time names turn 1 alone.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ok(m.cli(&["turn", "2", "-m", "second prompt"]));
    m.sh("echo two > f; echo new > g; rm d/x");
    ok(m.cli(&["turn", "3", "-m", "Fix the build"]));
    m.sh("echo three > f; echo more >> k2; rm g; ln -s f link");
    let report = json(m.cli(&["rewind", "-1", "--yes", "--json"]));
    assert_eq!(
        (report["spec"].as_str(), report["to"].as_u64()),
        (Some("-1"), Some(2))
    );
    assert_eq!(m.sh("cat f; cat k"), "one\nkeep\n");
    // `log` lists the work rewind #K retired: turn 3, and what turn 2 had done before it.
    let rows = json(m.cli(&["log", "--json"]));
    let rows = rows.as_array().expect("rows");
    let k = rows
        .iter()
        .find_map(|r| r["rewound_by"].as_u64())
        .expect("a retired turn");
    let listed: Vec<String> = rows
        .iter()
        .map(|r| match r["rewound_by"].as_u64() {
            Some(k) => format!("{}#{k}", r["turn"]),
            None => r["turn"].to_string(),
        })
        .collect();
    let (r2, r3) = (format!("2#{k}"), format!("3#{k}"));
    assert_eq!(listed, ["1", &r2, "2", &r3], "{rows:?}");
    let retired_2 = rows
        .iter()
        .find(|r| r["turn"] == 2 && r["rewound_by"].is_u64())
        .expect("2#K");
    assert_eq!(
        (
            retired_2["created"].as_u64(),
            retired_2["modified"].as_u64()
        ),
        (Some(1), Some(1)),
        "the turn rewound to keeps the counts it ended with: {retired_2}"
    );
    let before = tree(&m.dir, false);
    let ops_before = ok(m.cli(&["op", "log", "--json"]));

    // Reading: each form, and the retired turns without an undo.
    let cat = |spec: &str, path: &str| ok(with_paths(&m, &["cat", spec], &[path]));
    assert_eq!(cat(&r3, "f"), "two\n");
    assert_eq!(
        cat("3", "f"),
        "two\n",
        "the one retired turn 3, by its number"
    );
    assert_eq!(
        cat(&r3, "k"),
        "keep\n",
        "k as it was, though k2 was written since"
    );
    assert_eq!(cat(&r3, "g"), "new\n");
    let never = with_paths(&m, &["cat", &r3], &["d/y"]);
    assert!(text(&never).contains("did not exist"), "{}", text(&never));
    assert_eq!(cat(&r2, "f"), "one\n");
    assert_eq!(
        cat("/fix", "f"),
        "two\n",
        "the newest label with `fix`, any case"
    );
    assert_eq!(cat("-1", "f"), "one\n");
    let t1 = rows[0]["time"].as_u64().expect("time");
    assert_eq!(
        cat(&format!("@{}", local(&m, t1)), "d/x"),
        "x\n",
        "turn 1 at its start"
    );
    let shown = json(m.cli(&["show", &r3, "--json"]));
    let changes: Vec<(String, String)> = shown
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or("?").into(),
                c["change"].as_str().unwrap_or("?").into(),
            )
        })
        .collect();
    let want = [
        ("f", "modified"),
        ("g", "deleted"),
        ("k2", "modified"),
        ("link", "created"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(changes, want);
    let stat = ok(m.cli(&["diff", &format!("{r2}..{r3}"), "--stat"]));
    for line in ["d/x", "f ", "g "] {
        assert!(stat.contains(line), "{line:?} not in {stat}");
    }
    let out = m.dir.parent().expect("tmp").join("f.turn3");
    let to = out.to_str().expect("utf-8");
    ok(with_paths(&m, &["restore", &r3, "--to", to], &["f"]));
    assert_eq!(std::fs::read_to_string(&out).expect("restored"), "two\n");

    // Specs that name nothing, or a retired turn for a rewind: usage errors naming the turns.
    usage_error(
        with_paths(&m, &["cat", "9"], &["f"]),
        &["turn 9 does not exist", &r2, &r3],
    );
    usage_error(m.cli(&["show", "3#99"]), &["no turn 3#99", &r3]);
    usage_error(m.cli(&["rewind", &r3, "--yes"]), &["live turn", "undo"]);
    usage_error(
        m.cli(&["rewind", "/nothing", "--yes"]),
        &["\"second prompt\""],
    );
    usage_error(m.cli(&["diff", "-5"]), &["only 1 turns before"]);
    assert!(std::fs::write(m.path(".ckpt/rewind"), "/Fix the build\n").is_err());

    // Nothing above changed the folder or the history.
    common::assert_same_tree(&before, &tree(&m.dir, false));
    assert_eq!(ok(m.cli(&["op", "log", "--json"])), ops_before);

    // `.ckpt/rewind` takes moments too.
    std::fs::write(m.path(".ckpt/rewind"), "/mounted\n").expect("rewind by label");
    assert_eq!(m.sh("cat f; ls d"), "one\nx\n");
}

on_both_mounts!(
    /// Every moment form on root's mount.
    moments_name_turns_and_retired_work_reads_back_on_roots_mount,
    moments_name_turns_and_retired_work_reads_back_on_a_users_mount,
    moments_name_turns_and_retired_work_reads_back
);

fn a_turn_retired_twice_is_ambiguous_by_its_number() {
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "a\n").expect("f"));
    ok(m.cli(&["turn", "2"]));
    m.sh("echo b > f");
    ok(m.cli(&["rewind", "1", "--yes"]));
    ok(m.cli(&["turn", "2"]));
    m.sh("echo c > f");
    ok(m.cli(&["rewind", "1", "--yes"]));
    // Rewinds #3 and #5 each retired a turn 2, and both are in effect.
    usage_error(
        with_paths(&m, &["cat", "2"], &["f"]),
        &["ambiguous", "2#3", "2#5"],
    );
    let diff_of = |spec: &str| ok(m.cli(&["show", spec]));
    assert!(diff_of("2#3").contains("+b"), "{}", diff_of("2#3"));
    assert!(diff_of("2#5").contains("+c"), "{}", diff_of("2#5"));
    assert_eq!(ok(with_paths(&m, &["cat", "2#5"], &["f"])), "a\n");
}

on_both_mounts!(
    /// `N` of a turn retired twice.
    a_turn_retired_twice_is_ambiguous_on_roots_mount,
    a_turn_retired_twice_is_ambiguous_on_a_users_mount,
    a_turn_retired_twice_is_ambiguous_by_its_number
);

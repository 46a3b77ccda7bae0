//! Names reach the terminal quoted as git quotes them (`core.quotePath`, its default): a name
//! holding a newline, a carriage return, a tab, an escape sequence, a double quote or a byte
//! over 0x7f is printed whole in double quotes with C escapes, so that it can neither fake nor
//! hide a line of the rewind preview, the rewind report, `diff`, `show`, `log` or `status`.
//! `--json` keeps every name raw.

mod common;
use common::{Mounted, output_text, require_fuse, require_program};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output};

/// A name that forges a line, one that moves the cursor back over a line, one that colours the
/// terminal, a tab, a double quote and a multi-byte character.
const CREATED: [&str; 2] = ["esc\x1b[31mred", "quote\"d"];
const RESTORED: [&str; 3] = ["new\nline.txt", "tab\there", "é.txt"];
/// Over `--max-blob` (1K here): its capture stores nothing, so a rewind cannot restore it.
const OVER_MAX_BLOB: &str = "over\rmax.bin";

fn all_names() -> Vec<&'static str> {
    CREATED
        .iter()
        .chain(&RESTORED)
        .chain(&[OVER_MAX_BLOB])
        .copied()
        .collect()
}

/// How git itself prints each of `names` (`git ls-files` in a new repository holding them),
/// by name.
fn git_quoted(names: &[&str]) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let git = |args: &[&str]| -> Output {
        let o = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run git");
        assert!(o.status.success(), "git {args:?}: {}", output_text(&o));
        o
    };
    git(&["init", "-q"]);
    for n in names {
        std::fs::write(dir.path().join(n), b"x").expect("write");
    }
    git(&["add", "-A"]);
    let raw = git(&["ls-files", "-z"]).stdout;
    let quoted = String::from_utf8(git(&["ls-files"]).stdout).expect("git quotes to ASCII");
    let raw: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8(n.to_vec()).expect("UTF-8 name"))
        .collect();
    let quoted: Vec<String> = quoted.lines().map(str::to_string).collect();
    assert_eq!(raw.len(), names.len(), "{raw:?}");
    raw.into_iter().zip(quoted).collect()
}

/// The stdout of `o` as lines; it must hold no byte a name could have brought in raw.
fn lines(o: &Output) -> Vec<String> {
    let out = String::from_utf8(o.stdout.clone()).expect("UTF-8 output");
    for bad in ['\x1b', '\t', '\r'] {
        assert!(!out.contains(bad), "{bad:?} printed raw:\n{out}");
        assert!(!output_text(o).contains(bad), "{bad:?} printed raw:\n{out}");
    }
    out.lines().map(str::to_string).collect()
}

/// The `lines` each start with one of `want` (every one of them once), but for `rest`,
/// the lines that do not name a path (summaries), at the end.
fn assert_lines(lines: &[String], want: &[String], rest: &[&str]) {
    assert_eq!(lines.len(), want.len() + rest.len(), "{lines:#?}");
    let (named, tail) = lines.split_at(want.len());
    let mut left: BTreeSet<&String> = want.iter().collect();
    for l in named {
        let hit = left.iter().copied().find(|w| l.starts_with(w.as_str()));
        let hit = hit.unwrap_or_else(|| panic!("{l:?} is not a line expected\n{lines:#?}"));
        left.remove(hit);
    }
    for (l, r) in tail.iter().zip(rest) {
        assert!(l.starts_with(r), "{l:?} should start with {r:?}");
    }
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", output_text(o)))
}

fn json_names(v: &Value) -> BTreeSet<String> {
    let list = v.as_array().expect("a list");
    list.iter()
        .map(|p| p.as_str().expect("a raw name").to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn every_view_quotes_names_as_git_does_and_json_keeps_them_raw() {
    if !require_fuse() || !require_program("git") {
        return;
    }
    let q = git_quoted(&all_names());
    let m = Mounted::with_args(
        |d| {
            std::fs::write(d.join(RESTORED[0]), "one\n").expect("write");
            std::fs::write(d.join(RESTORED[1]), "tab\n").expect("write");
            std::fs::write(d.join(RESTORED[2]), "e\n").expect("write");
            std::fs::write(d.join(OVER_MAX_BLOB), vec![b'x'; 4096]).expect("write");
        },
        &["--max-blob", "1K"],
    );
    m.turn(2);
    std::fs::write(m.path(RESTORED[0]), "two\n").expect("write");
    std::fs::remove_file(m.path(RESTORED[1])).expect("remove");
    std::fs::write(m.path(RESTORED[2]), "é\n").expect("write");
    for n in CREATED {
        std::fs::write(m.path(n), "new\n").expect("write");
    }
    std::fs::write(m.path(OVER_MAX_BLOB), vec![b'y'; 4096]).expect("write");

    let over = &q[OVER_MAX_BLOB];
    let mut preview: Vec<String> = CREATED
        .iter()
        .map(|n| format!("delete   {}", q[*n]))
        .collect();
    preview.extend(RESTORED.iter().map(|n| format!("restore  {}", q[*n])));
    preview.push(format!("cannot   {over}: not restored: 4096 bytes is over"));
    let dry = m.cli(&["rewind", "2", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(1), "{}", output_text(&dry));
    assert_lines(&lines(&dry), &preview, &["dry run, nothing changed: "]);
    let said = String::from_utf8_lossy(&dry.stderr);
    assert!(
        said.contains(&format!("1 path cannot be restored ({over}: ")),
        "{said}"
    );

    let v = json(&m.cli(&["rewind", "2", "--dry-run", "--json"]));
    assert_eq!(json_names(&v["deleted"]), set(&CREATED), "{v:#}");
    assert_eq!(json_names(&v["restored"]), set(&RESTORED), "{v:#}");
    assert_eq!(v["failed"][0]["path"], OVER_MAX_BLOB, "{v:#}");

    assert_views(&m, &q);

    let run = m.cli(&["rewind", "2"]);
    assert_eq!(run.status.code(), Some(1), "{}", output_text(&run));
    let mut report: Vec<String> = RESTORED
        .iter()
        .map(|n| format!("restored {}", q[*n]))
        .collect();
    report.extend(CREATED.iter().map(|n| format!("deleted  {}", q[*n])));
    report.push(format!("FAILED   {over}: not restored"));
    assert_lines(
        &lines(&run),
        &report,
        &["rewound to the start of turn 2: 3 restored"],
    );
    assert_eq!(std::fs::read(m.path(RESTORED[0])).expect("read"), b"one\n");
}

/// `diff`, `show`, `log`, `status` and `cat` over turn 2 of the test above.
fn assert_views(m: &Mounted, q: &BTreeMap<String, String>) {
    let every: Vec<String> = all_names().iter().map(|n| format!(" {} ", q[*n])).collect();
    for args in [["diff", "2", "--stat"], ["show", "2", "--stat"]] {
        let o = m.cli(&args);
        assert!(o.status.success(), "{}", output_text(&o));
        let l = lines(&o);
        let rest: &[&str] = if l.len() > every.len() + 1 {
            &[" 6 paths changed", " no agent marked"]
        } else {
            &[" 6 paths changed"]
        };
        assert_lines(&l, &every, rest);
    }
    let v = json(&m.cli(&["diff", "2", "--json"]));
    let paths: BTreeSet<String> = v
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["path"].as_str().expect("a raw name").to_string())
        .collect();
    assert_eq!(paths, set(&all_names()), "{v:#}");

    // A patch's headers quote the whole `a/NAME`, as git's do.
    let patch = lines(&m.cli(&["diff", "2"]));
    let name = &q[RESTORED[0]];
    for want in [
        format!("modified {name}"),
        format!("--- \"a/{}", &name[1..]),
        format!("+++ \"b/{}", &name[1..]),
    ] {
        assert!(patch.contains(&want), "no line {want:?} in {patch:#?}");
    }

    let skipped = format!(
        "1 file over --max-blob was not captured: {} (4.0 KiB); a rewind cannot restore it",
        q[OVER_MAX_BLOB]
    );
    let log = lines(&m.cli(&["log"]));
    assert!(
        log.iter().any(|l| l.trim_start() == format!("! {skipped}")),
        "{log:#?}"
    );
    let status = lines(&m.cli(&["status"]));
    let in_turn = skipped.replace("captured:", "captured in turn 2:");
    assert!(
        status.contains(&format!("warning:  {in_turn}")),
        "{status:#?}"
    );

    let cat = Command::new(common::bin())
        .args(["cat", "2", "--dir"])
        .arg(&m.dir)
        .arg("--")
        .arg(std::ffi::OsStr::from_bytes(CREATED[0].as_bytes()))
        .output()
        .expect("run cat");
    let said = String::from_utf8_lossy(&cat.stderr);
    assert_eq!(
        said.trim_end(),
        format!(
            "ckpt-mount: {} did not exist when turn 2 began",
            q[CREATED[0]]
        )
    );
}

/// A name that is not UTF-8 (Latin-1 `café.txt`, a directory named by a byte 0xff).
const LATIN1: &[u8] = b"caf\xe9.txt";
const ODD_DIR: &[u8] = b"dir\xff";

fn os(bytes: &[u8]) -> &std::ffi::OsStr {
    std::ffi::OsStr::from_bytes(bytes)
}

/// `ckpt-mount ARGS --dir DIR -- PATHS`.
fn cli_with_paths(m: &Mounted, args: &[&str], paths: &[&[u8]]) -> Output {
    let mut cmd = Command::new(common::bin());
    cmd.args(args).arg("--dir").arg(&m.dir);
    if !paths.is_empty() {
        cmd.arg("--");
    }
    for p in paths {
        cmd.arg(m.dir.join(os(p)));
    }
    cmd.output().expect("run the cli")
}

/// Every name of the folder below `dir` with its bytes, sorted.
fn tree(dir: &std::path::Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(dir)
                .expect("below")
                .as_os_str()
                .as_bytes()
                .to_vec();
            if p.is_dir() {
                stack.push(p);
                out.push((rel, Vec::new()));
            } else {
                out.push((rel, std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

fn hex(bytes: &[u8]) -> Value {
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({ "hex": h })
}

#[test]
fn a_name_that_is_not_utf8_is_rewound_by_path_and_reported_by_its_bytes() {
    if common::user::in_user_run() {
        a_name_that_is_not_utf8_property();
    } else if require_fuse() {
        a_name_that_is_not_utf8_property();
        common::user::rerun_as_user(
            "a_name_that_is_not_utf8_is_rewound_by_path_and_reported_by_its_bytes",
        );
    }
}

fn a_name_that_is_not_utf8_property() {
    let inner: Vec<u8> = [ODD_DIR, b"/f"].concat();
    let m = Mounted::with_args(
        |d| {
            std::fs::write(d.join(os(LATIN1)), "one\n").expect("write");
            std::fs::create_dir(d.join(os(ODD_DIR))).expect("mkdir");
            std::fs::write(d.join(os(&inner)), "inner\n").expect("write");
            std::os::unix::fs::symlink(os(LATIN1), d.join("link")).expect("symlink");
        },
        &[],
    );
    m.turn(2);
    std::fs::write(m.dir.join(os(LATIN1)), "two\n").expect("write");
    std::fs::write(m.dir.join(os(&inner)), "changed\n").expect("write");
    let made: &[u8] = b"made\xfe";
    std::fs::write(m.dir.join(os(made)), "new\n").expect("write");

    // The preview names them quoted as git quotes bytes over 0x7f; --json gives the bytes.
    let dry = cli_with_paths(&m, &["rewind", "2", "--dry-run"], &[]);
    assert!(dry.status.success(), "{}", output_text(&dry));
    let shown = lines(&dry);
    for want in [
        r#"restore  "caf\351.txt""#,
        r#"restore  "dir\377/f""#,
        r#"delete   "made\376""#,
    ] {
        assert!(shown.iter().any(|l| l == want), "no {want:?} in {shown:#?}");
    }
    let v = json(&cli_with_paths(
        &m,
        &["rewind", "2", "--dry-run", "--json"],
        &[],
    ));
    let restored: BTreeSet<String> = v["restored"]
        .as_array()
        .expect("a list")
        .iter()
        .map(Value::to_string)
        .collect();
    let want: BTreeSet<String> = [hex(LATIN1), hex(&inner)]
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(restored, want, "{v:#}");
    assert_eq!(v["deleted"], serde_json::json!([hex(made)]), "{v:#}");
    let d = json(&cli_with_paths(&m, &["diff", "2", "--json"], &[]));
    let paths: BTreeSet<String> = d
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["path"].to_string())
        .collect();
    let want: BTreeSet<String> = [hex(LATIN1), hex(&inner), hex(made)]
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(paths, want, "{d:#}");

    // `cat` finds it by its bytes.
    let cat = cli_with_paths(&m, &["cat", "2"], &[LATIN1]);
    assert!(cat.status.success(), "{}", output_text(&cat));
    assert_eq!(cat.stdout, b"one\n");

    // `restore --to` of a symlink whose target is not UTF-8 makes the same target.
    std::fs::remove_file(m.dir.join("link")).expect("rm");
    let copy = tempfile::tempdir().expect("tempdir");
    let dest = copy.path().join("link-copy");
    let restore = Command::new(common::bin())
        .args(["restore", "2", "--dir"])
        .arg(&m.dir)
        .arg("--to")
        .arg(&dest)
        .arg("--")
        .arg("link")
        .output()
        .expect("run restore");
    assert!(restore.status.success(), "{}", output_text(&restore));
    let target = std::fs::read_link(&dest).expect("a symlink");
    assert_eq!(target.as_os_str().as_bytes(), LATIN1);
    std::os::unix::fs::symlink(os(LATIN1), m.dir.join("link")).expect("symlink");

    // A partial rewind of the directory by its name: that and nothing else changes.
    let before = tree(&m.dir);
    let part = cli_with_paths(&m, &["rewind", "2", "--json"], &[ODD_DIR]);
    assert!(part.status.success(), "{}", output_text(&part));
    let r = json(&part);
    assert_eq!(r["only"], serde_json::json!([hex(ODD_DIR)]), "{r:#}");
    assert_eq!(r["restored"], serde_json::json!([hex(&inner)]), "{r:#}");
    let after = tree(&m.dir);
    let changed: Vec<&Vec<u8>> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, _)| &b.0)
        .collect();
    assert_eq!(before.len(), after.len());
    assert_eq!(changed, [&inner], "only dir\\377/f changed");
    assert_eq!(
        std::fs::read(m.dir.join(os(&inner))).expect("read"),
        b"inner\n"
    );

    // The whole rewind, reported quoted.
    let run = cli_with_paths(&m, &["rewind", "2"], &[]);
    assert!(run.status.success(), "{}", output_text(&run));
    let shown = lines(&run);
    for want in [r#"restored "caf\351.txt""#, r#"deleted  "made\376""#] {
        assert!(shown.iter().any(|l| l == want), "no {want:?} in {shown:#?}");
    }
    assert_eq!(
        std::fs::read(m.dir.join(os(LATIN1))).expect("read"),
        b"one\n"
    );
    assert!(std::fs::symlink_metadata(m.dir.join(os(made))).is_err());
}

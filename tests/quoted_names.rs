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

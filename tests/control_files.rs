//! The virtual `.ckpt/` of the mounted view: strict input to `turn` and `rewind`, the read-only
//! `.gitignore`, a store nothing in the mount can reach, and turn numbering across remounts.

mod common;
use common::{Mounted, require_fuse};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes each input to `.ckpt/turn` in its own `open(O_WRONLY|O_TRUNC)` + one `write(2)` and
/// returns the errno of each (0 for success), in order.
fn write_turn_errnos(m: &Mounted, inputs: &[&[u8]]) -> Vec<i32> {
    let list: Vec<String> = inputs
        .iter()
        .map(|i| format!("bytes.fromhex('{}')", hex(i)))
        .collect();
    write_turn_errnos_py(m, &list)
}

/// As `write_turn_errnos`, each input given as a Python bytes expression.
fn write_turn_errnos_py(m: &Mounted, list: &[String]) -> Vec<i32> {
    let script = format!(
        r#"python3 - <<'EOF'
import os
for data in [{}]:
    fd = os.open('.ckpt/turn', os.O_WRONLY | os.O_TRUNC)
    try:
        n = os.write(fd, data)
        print(0 if n == len(data) else -1)
    except OSError as e:
        print(e.errno)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
EOF"#,
        list.join(", ")
    );
    m.sh(&script)
        .lines()
        .map(|l| l.trim().parse::<i32>().expect("an errno"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn current_turn(m: &Mounted) -> String {
    m.sh("cat .ckpt/turn")
}

fn log_json(m: &Mounted) -> serde_json::Value {
    let out = m.cli(&["log", "--json"]);
    assert!(
        out.status.success(),
        "log failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("log --json is JSON")
}

#[test]
fn bad_input_to_turn_is_einval_and_changes_nothing() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.turn(3);
    assert_eq!(current_turn(&m), "3\n");
    let inputs: Vec<&[u8]> = vec![
        b"abc",
        b"abc\n",
        b"\n",
        b"-1\n",
        b"0\n",
        b"0",
        b"2\n",
        b"1\n",
        b"1e30\n",
        b"+4\n",
        b" 4\n",
        b"4\n\n",
        b"4.0\n",
        b"99999999999999999999\n",
        b"4 bad\x07label\n",
    ];
    let errnos = write_turn_errnos(&m, &inputs);
    assert_eq!(
        errnos,
        vec![libc::EINVAL; inputs.len()],
        "every bad input is EINVAL"
    );
    // 1 MB in one write(2): all digits, and a valid turn followed by padding.
    let big = [
        "b'7' * (1 << 20)".to_string(),
        "b'4\\n' + b' ' * (1 << 20)".to_string(),
    ];
    assert_eq!(
        write_turn_errnos_py(&m, &big),
        vec![libc::EINVAL; 2],
        "a 1 MB write is EINVAL"
    );
    assert_eq!(current_turn(&m), "3\n");
    // The same through the shell: a failed redirection write is a failed command.
    for bad in ["abc", "", "-1", "0", "2", "1e30"] {
        let out = m.sh_output(&format!("printf '{bad}\\n' > .ckpt/turn"));
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert_eq!(current_turn(&m), "3\n", "{bad:?} changed the turn");
    }
    let out = m.sh_output("head -c 1048576 /dev/zero | tr '\\0' 9 > .ckpt/turn");
    assert!(!out.status.success(), "a 1 MB write was accepted");
    assert_eq!(current_turn(&m), "3\n");
    // Nothing of it reached the journal: turns 1 and 3 only.
    let turns: Vec<u64> = log_json(&m)
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["turn"].as_u64().expect("turn"))
        .collect();
    assert_eq!(turns, vec![1, 3]);
}

#[test]
fn an_empty_write_to_turn_fails() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.turn(2);
    // Opened for writing, truncated, closed without a byte: nothing to parse.
    let out = m.sh(r#"python3 -c "
import os
fd = os.open('.ckpt/turn', os.O_WRONLY | os.O_TRUNC)
try:
    os.write(fd, b'')
    os.close(fd)
    print(0)
except OSError as e:
    print(e.errno)
""#);
    assert_eq!(out.trim(), libc::EINVAL.to_string());
    assert_eq!(current_turn(&m), "2\n");
}

#[test]
fn a_turn_with_a_label_and_the_current_number_again() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("printf '3 my label\\n' > .ckpt/turn");
    assert_eq!(current_turn(&m), "3\n");
    let out = m.cli(&["log"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with('3') && l.ends_with("my label")),
        "log does not show the label:\n{text}"
    );
    // The current number alone: success, and no new turn.
    assert_eq!(write_turn_errnos(&m, &[b"3\n", b"3"]), vec![0, 0]);
    m.sh("echo 3 > .ckpt/turn");
    assert_eq!(current_turn(&m), "3\n");
    let rows = log_json(&m);
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "turns 1 and 3: {rows:?}");
    assert_eq!(rows[1]["turn"], 3);
    assert_eq!(rows[1]["label"], "my label");
}

#[test]
fn rewind_control_file_and_gitignore() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "before\n").expect("write"));
    assert_eq!(m.sh("cat .ckpt/.gitignore"), "*\n");
    assert!(!m.sh_output("echo x > .ckpt/.gitignore").status.success());
    assert_eq!(m.sh("cat .ckpt/.gitignore"), "*\n");
    assert_eq!(m.sh("ls -A .ckpt"), ".gitignore\nrewind\nturn\nturns\n");
    m.turn(2);
    m.sh("echo after > f; echo new > g");
    m.sh("echo 2 > .ckpt/rewind");
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "before\n"
    );
    assert!(!m.path("g").exists());
    let report: serde_json::Value =
        serde_json::from_str(&m.sh("cat .ckpt/rewind")).expect("the report is JSON");
    assert_eq!(report["to"], 2);
    assert_eq!(report["restored"], serde_json::json!(["f"]));
    assert_eq!(report["deleted"], serde_json::json!(["g"]));
    assert_eq!(report["failed"], serde_json::json!([]));
    // Bad input to rewind: EINVAL, nothing changes.
    for bad in ["abc", "0", "9", "2 x"] {
        let out = m.sh_output(&format!("printf '{bad}\\n' > .ckpt/rewind"));
        assert!(!out.status.success(), "{bad:?} accepted by .ckpt/rewind");
    }
    assert_eq!(current_turn(&m), "2\n");
}

/// Every file below the real store (relative path -> bytes), except the daemon's log and lock.
fn real_store(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(base.join(rel)).expect("read store dir") {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                out.insert(format!("{path}/"), Vec::new());
                walk(base, &path, out);
            } else if path != "daemon.log" && path != "lock" {
                out.insert(path.clone(), std::fs::read(base.join(&path)).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&dir.join(".ckpt"), "", &mut out);
    out
}

#[test]
fn the_store_is_unreachable_from_the_mount() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| std::fs::write(d.join("f"), "x\n").expect("write"));
    m.turn(2);
    m.sh("echo y > f");
    m.unmount();
    let store_before = real_store(&m.dir);
    assert!(store_before.contains_key("journal.jsonl"));
    m.remount();
    for attack in [
        "rm -rf .ckpt",
        "rm -f .ckpt/turn",
        "mv .ckpt x",
        "mv .ckpt/turn .ckpt/t",
        "mv f .ckpt/f",
        "touch .ckpt/x",
        "mkdir .ckpt/d",
        "ln .ckpt/turn x",
        "ln f .ckpt/f",
        "ln -s f .ckpt/l",
        "chmod 777 .ckpt",
        "chmod 777 .ckpt/turn",
        "cat .ckpt/journal.jsonl",
        "ls .ckpt/blobs",
        "rmdir .ckpt",
    ] {
        let out = m.sh_output(attack);
        assert!(!out.status.success(), "`{attack}` succeeded");
    }
    assert!(!m.path("x").exists());
    assert_eq!(m.sh("ls -A .ckpt"), ".gitignore\nrewind\nturn\nturns\n");
    assert_eq!(m.sh("cat f"), "y\n");
    // Tree walkers do not see it at all.
    assert_eq!(m.sh("ls -A"), "f\n");
    m.unmount();
    let store_after = real_store(&m.dir);
    assert!(
        store_after.contains_key("journal.jsonl"),
        "the journal is gone"
    );
    assert_eq!(store_before, store_after, "the real store changed");
}

#[test]
fn a_remount_continues_the_turn_numbering() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::new();
    m.turn(3);
    m.sh("echo a > a");
    m.unmount();
    m.remount();
    assert_eq!(current_turn(&m), "3\n");
    assert_eq!(write_turn_errnos(&m, &[b"2\n"]), vec![libc::EINVAL]);
    m.turn(4);
    assert_eq!(current_turn(&m), "4\n");
    m.rewind(3);
    assert!(!m.path("a").exists());
}

#[test]
fn rewinding_twice_and_to_a_retired_turn() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "one\n").expect("write"));
    m.turn(2);
    m.sh("echo two > f");
    m.turn(3);
    m.sh("echo three > f");
    m.rewind(2);
    assert_eq!(m.sh("cat f"), "one\n");
    let second = m.cli(&["rewind", "2", "--json"]);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&second.stdout).expect("json");
    assert_eq!(report["restored"], serde_json::json!([]));
    assert_eq!(report["deleted"], serde_json::json!([]));
    assert_eq!(m.sh("cat f"), "one\n");
    // Turn 3 is listed, retired: a rewind goes to live turns only, and says how to get it back.
    let third = m.cli(&["rewind", "3"]);
    assert_eq!(third.status.code(), Some(2));
    let err = String::from_utf8_lossy(&third.stderr);
    assert!(
        err.contains("turn 3 was retired by a rewind") && err.contains("undo"),
        "stderr: {err}"
    );
    assert_eq!(m.sh("cat f"), "one\n");
    assert_eq!(current_turn(&m), "2\n");
}

/// A new turn is at most 4294967295 (2^32 - 1, docs/SEMANTICS.md): a number past it is
/// `EINVAL` on `.ckpt/turn` and a usage error of `ckpt-mount turn`, and changes nothing, so a
/// later turn still begins; the bound itself is accepted, and then the hooks say the numbers
/// are used up instead of failing some other way.
#[test]
fn a_turn_past_the_documented_bound_is_refused_and_later_turns_still_begin() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.turn(3);
    let past: Vec<&[u8]> = vec![
        b"4294967296\n",
        b"9007199254740991\n",
        b"9007199254740991 label\n",
        b"18446744073709551615\n",
    ];
    assert_eq!(
        write_turn_errnos(&m, &past),
        vec![libc::EINVAL; past.len()],
        "every number past the bound is EINVAL"
    );
    assert_eq!(current_turn(&m), "3\n");
    for n in ["4294967296", "9007199254740991"] {
        let o = m.cli(&["turn", n]);
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "turn {n}: {said}");
        assert_eq!(
            said,
            "ckpt-mount: a turn is a whole number from 1 to 4294967295\n"
        );
    }
    assert_eq!(current_turn(&m), "3\n");
    m.turn(4);
    assert_eq!(current_turn(&m), "4\n");
    assert_eq!(write_turn_errnos(&m, &[b"4294967295 last\n"]), vec![0]);
    assert_eq!(current_turn(&m), "4294967295\n");
    let o = m.cli(&["turn", "4294967295"]);
    assert!(o.status.success(), "the current number again is a no-op");
    // What an agent's hook runs at each prompt: the next turn, which does not exist.
    let payload = format!(
        r#"{{"hook_event_name":"UserPromptSubmit","cwd":"{}","prompt":"one more"}}"#,
        m.dir.display()
    );
    let o = std::process::Command::new(common::bin())
        .args(["hook", "claude-code"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(payload.as_bytes())?;
            c.wait_with_output()
        })
        .expect("run the hook");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("the turn numbers are used up")
            && shown.contains("a turn is at most 4294967295"),
        "{shown}"
    );
    assert_eq!(current_turn(&m), "4294967295\n");
    let turns: Vec<u64> = log_json(&m)
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["turn"].as_u64().expect("turn"))
        .collect();
    assert_eq!(turns, vec![1, 3, 4, 4294967295]);
}

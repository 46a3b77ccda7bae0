//! Everyday commands on real mounts: run, diff, prune.

mod common;
use common::{Mounted, bin, require_fuse};
use std::process::Command;

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn run_mounts_runs_inside_and_unmounts_with_the_commands_exit_code() {
    if !require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("proj");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("f"), "before\n").expect("write");
    let o = Command::new(bin())
        .args(["run", "--dir"])
        .arg(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "test -f .ckpt/turn && echo 2 > .ckpt/turn && echo agent > f && exit 7",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(7), "{}", out(&o));
    assert!(
        !ckpt_mount::mounts::is_ckpt_mount(&dir.canonicalize().expect("canon")),
        "run unmounts after"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).expect("read"),
        "agent\n"
    );
    let o = Command::new(bin())
        .args(["rewind", "2", "--dir"])
        .arg(&dir)
        .output()
        .expect("rewind");
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).expect("read"),
        "before\n"
    );
}

#[test]
fn run_inside_an_already_mounted_folder_leaves_it_mounted() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    let o = Command::new(bin())
        .args(["run", "--dir"])
        .arg(&m.dir)
        .args(["--", "true"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", out(&o));
    assert!(ckpt_mount::mounts::is_ckpt_mount(&m.dir));
}

#[test]
fn diff_shows_text_changes_creations_deletions_modes_and_links() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("a.txt"), "one\ntwo\nthree\n").expect("write");
        std::fs::write(d.join("gone.txt"), "bye\n").expect("write");
        std::fs::write(d.join("bin.dat"), [0u8, 1, 2, 3]).expect("write");
        std::os::unix::fs::symlink("a.txt", d.join("link")).expect("symlink");
    });
    m.turn(2);
    m.sh("sed -i s/two/TWO/ a.txt; rm gone.txt; echo hi > new.txt; printf '\\0\\9' > bin.dat; chmod 700 a.txt; ln -sfn new.txt link");
    let o = m.cli(&["diff", "2"]);
    assert!(o.status.success(), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "modified a.txt",
        "-two",
        "+TWO",
        "mode 644 -> 700",
        "deleted gone.txt",
        "-bye",
        "created new.txt",
        "+hi",
        "binary files differ",
        "symlink a.txt -> new.txt",
    ] {
        assert!(text.contains(want), "diff lacks {want:?}:\n{text}");
    }
    assert!(!text.contains("\x1b["), "no colour when not on a terminal");
    let o = m.cli(&["diff", "2", "--stat"]);
    let stat = String::from_utf8_lossy(&o.stdout);
    assert!(stat.contains("paths changed"), "{stat}");
    // Limited to one path.
    let o = Command::new(bin())
        .args(["diff", "2", "--dir"])
        .arg(&m.dir)
        .args(["--", "new.txt"])
        .output()
        .expect("diff");
    let only = String::from_utf8_lossy(&o.stdout);
    assert!(
        only.contains("created new.txt") && !only.contains("a.txt"),
        "{only}"
    );
}

#[test]
fn prune_keeps_the_newest_turns_and_frees_their_blobs() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), vec![b'x'; 200_000]).expect("write"));
    for t in 2..=5u8 {
        m.turn(u64::from(t));
        m.sh(&format!("head -c 200000 /dev/zero | tr '\\0' '{t}' > f"));
    }
    let before: serde_json::Value =
        serde_json::from_slice(&m.cli(&["status", "--json"]).stdout).expect("json");
    let o = m.cli(&["prune", "--keep-turns", "2", "--yes", "--json"]);
    assert!(o.status.success(), "{}", out(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(r["kept_turns"], serde_json::json!([4, 5]));
    assert_eq!(r["dropped_turns"], serde_json::json!([1, 2, 3]));
    assert!(r["freed_bytes"].as_u64().expect("freed") >= 400_000, "{r}");
    let after: serde_json::Value =
        serde_json::from_slice(&m.cli(&["status", "--json"]).stdout).expect("json");
    assert!(after["store_bytes"].as_u64() < before["store_bytes"].as_u64());
    // Rewinding to a pruned turn is refused (a turn that does not exist: a usage error); to a
    // kept one it is exact.
    let o = m.cli(&["rewind", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    m.rewind(4);
    assert_eq!(
        std::fs::read(m.path("f")).expect("read"),
        vec![b'3'; 200_000]
    );
    let o = m.cli(&["fsck"]);
    assert!(o.status.success(), "{}", out(&o));
}

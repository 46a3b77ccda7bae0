//! The most natural first command, from a shell standing in the folder:
//! `cd site && ckpt-mount mount . && echo 2 > .ckpt/turn && rm keep.txt`. The shell still
//! stands in the folder *under* the mount, where nothing is captured. `mount` says so with the
//! remedy, the `echo` fails instead of writing a stray file into the real store (so `&&` stops
//! before the `rm`), commands run from there warn, and `fsck` names stray files in the store.

mod common;
use common::{Mounted, bin, require_fuse};
use std::process::Command;

#[test]
fn a_shell_left_under_the_mount_is_warned_and_cannot_mark_turns_into_the_store() {
    if !require_fuse() {
        return;
    }
    let out_dir = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-stale-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let site = tmp.path().join("site");
    std::fs::create_dir(&site).expect("mkdir");
    std::fs::write(site.join("keep.txt"), "keep me\n").expect("write");
    let script = format!(
        "cd {site} && {ck} mount . 2>{o}/mount.err && echo 2 > .ckpt/turn && rm keep.txt
echo $? > {o}/status
{ck} status 2>{o}/status.err >/dev/null
{ck} turn 2>{o}/turn.err >/dev/null
true",
        site = site.display(),
        ck = bin(),
        o = out_dir.path().display(),
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("sh");
    assert!(o.status.success());
    // The shell's own message for the redirection that failed.
    let shell_err = String::from_utf8_lossy(&o.stderr).into_owned();
    let m = Mounted::attach(&site);
    let read = |n: &str| std::fs::read_to_string(out_dir.path().join(n)).unwrap_or_default();
    let remedy = "cd \"$PWD\"";
    assert!(
        read("mount.err").contains(remedy),
        "mount: {}",
        read("mount.err")
    );
    assert!(shell_err.contains("Is a directory"), "echo: {shell_err}");
    assert_ne!(read("status").trim(), "0", "the chain stopped at the echo");
    assert!(m.path("keep.txt").exists(), "keep.txt was never removed");
    for cmd in ["status.err", "turn.err"] {
        assert!(read(cmd).contains(remedy), "{cmd}: {}", read(cmd));
    }
    // Through the mount (the right place), the turn switch works and nothing stray is there.
    m.turn(2);
    let o = m.cli(&["fsck"]);
    assert!(o.status.success());
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("stray"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    std::fs::remove_file(m.path("keep.txt")).expect("rm through the mount");
    m.rewind(2);
    assert!(m.path("keep.txt").exists());
}

#[test]
fn fsck_names_stray_files_in_the_store() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::new();
    m.unmount();
    // What a pre-guard `echo 2 > .ckpt/turn` from under the mount left, and any other file.
    let store = m.dir.join(".ckpt");
    std::fs::remove_dir(store.join("turn")).expect("the guard is a directory");
    std::fs::write(store.join("turn"), "2\n").expect("write stray");
    std::fs::write(store.join("notes.txt"), "x").expect("write stray");
    let o = Command::new(bin())
        .args(["fsck", "--dir"])
        .arg(&m.dir)
        .output()
        .expect("fsck");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("stray") && text.contains("notes.txt"),
        "{text}"
    );
    assert!(
        text.contains(".ckpt/turn") && text.contains("under the mount"),
        "{text}"
    );
    std::fs::remove_file(store.join("turn")).expect("rm");
    std::fs::remove_file(store.join("notes.txt")).expect("rm");
    m.remount();
}

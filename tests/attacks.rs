//! Attacks from inside the mount: nothing the agent does can make a rewind write outside the
//! folder, follow a symlink, or destroy the history.

mod common;
use common::{Mounted, assert_same_tree, require_fuse, tree};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

fn outside() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("ckpt-outside-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::write(d.path().join("secret"), "do not touch\n").expect("write");
    std::fs::create_dir(d.path().join("keys")).expect("mkdir");
    std::fs::write(d.path().join("keys/id"), "key\n").expect("write");
    d
}

#[test]
fn a_directory_replaced_by_a_symlink_to_outside_comes_back_and_outside_is_untouched() {
    if !require_fuse() {
        return;
    }
    let out = outside();
    let out_before = tree(out.path(), true);
    let m = Mounted::with(|d| {
        std::fs::create_dir_all(d.join("src/deep")).expect("mkdir");
        std::fs::write(d.join("src/main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(d.join("src/deep/secret"), "project secret\n").expect("write");
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh(&format!(
        "rm -rf src && ln -s {} src && echo planted > src/planted",
        out.path().display()
    ));
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    assert!(
        std::fs::symlink_metadata(m.path("src"))
            .expect("lstat")
            .is_dir()
    );
    // The write the agent made through its symlink went outside (not captured, documented);
    // the rewind itself neither deleted it nor wrote anything else there.
    let mut out_after = tree(out.path(), true);
    assert!(out_after.remove("planted").is_some());
    assert_same_tree(&out_before, &out_after);
}

#[test]
fn a_rewind_racing_a_symlink_swapper_never_writes_outside() {
    if !require_fuse() {
        return;
    }
    let out = outside();
    let out_before = tree(out.path(), true);
    let mut m = Mounted::with(|d| {
        std::fs::create_dir(d.join("d")).expect("mkdir");
        for i in 0..50 {
            std::fs::write(d.join(format!("d/f{i}")), format!("{i}\n")).expect("write");
        }
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("for i in $(seq 0 49); do echo changed > d/f$i; done; rm d/f7");
    m.unmount();
    // Offline rewind while something swaps the directory for a symlink on the raw folder.
    let swapper = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd {} && for i in $(seq 1 400); do mv d d.real 2>/dev/null; ln -s {} d 2>/dev/null; rm -f d 2>/dev/null; mv d.real d 2>/dev/null; done",
            m.dir.display(),
            out.path().display()
        ))
        .spawn()
        .expect("spawn swapper");
    let mut swapper = swapper;
    for _ in 0..5 {
        let _ = m.cli(&["rewind", "2"]);
    }
    swapper.wait().expect("wait swapper");
    assert_same_tree(&out_before, &tree(out.path(), true));
    // With the race over, a final rewind is exact.
    let _ = std::fs::remove_file(m.dir.join("d"));
    if m.dir.join("d.real").exists() {
        std::fs::rename(m.dir.join("d.real"), m.dir.join("d")).expect("restore name");
    }
    // A rewind the race made fail stays open, so this one completes it: the result is exact.
    let o = m.cli(&["rewind", "2"]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_same_tree(&before, &tree(&m.dir, false));
    m.remount();
}

#[test]
fn fifos_are_restored_and_devices_are_refused_with_a_reason() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("plain"), "x\n").expect("write");
    });
    m.sh("mkfifo pipe && mknod dev c 1 3");
    m.turn(2);
    // Capturing a FIFO never opens it, so removing one cannot block.
    m.sh("rm pipe dev");
    let o = m.cli(&["rewind", "2"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a device cannot be restored: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("FAILED   dev: not restored: device nodes"),
        "{text}"
    );
    let md = std::fs::symlink_metadata(m.path("pipe")).expect("pipe back");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&md.file_type()));
    assert!(!m.path("dev").exists());
}

#[test]
fn mount_options_and_store_permissions() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| std::fs::write(d.join("f"), "x\n").expect("write"));
    m.turn(2);
    m.sh("echo y > f");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let line = mounts
        .lines()
        .find(|l| l.contains(&format!(" {} ", m.dir.display())))
        .expect("mount line");
    assert!(line.contains("nosuid") && line.contains("nodev"), "{line}");
    // A single-user mount leaves permission checks to the host filesystem, which the daemon
    // meets with the only user the kernel lets in (tests/permissions.rs compares every errno
    // with ext4's); a mount others may enter keeps the kernel's checks.
    assert!(!line.contains("default_permissions"), "{line}");
    assert!(!line.contains("allow_other"), "{line}");
    let shared = Mounted::with_args(|_| {}, &["--allow-other"]);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let line = mounts
        .lines()
        .find(|l| l.contains(&format!(" {} ", shared.dir.display())))
        .expect("mount line");
    assert!(line.contains("default_permissions"), "{line}");
    assert!(line.contains("allow_other"), "{line}");
    drop(shared);
    m.unmount();
    let store = m.dir.join(".ckpt");
    let mut checked = 0;
    let mut stack = vec![store];
    while let Some(d) = stack.pop() {
        let md = std::fs::symlink_metadata(&d).expect("lstat");
        assert_eq!(md.permissions().mode() & 0o777, 0o700, "{}", d.display());
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            if md.is_dir() {
                stack.push(p);
            } else {
                assert_eq!(md.permissions().mode() & 0o777, 0o600, "{}", p.display());
                assert_eq!(md.uid(), 0);
                checked += 1;
            }
        }
    }
    assert!(checked >= 4, "journal, VERSION, lock, blob: {checked}");
    m.remount();
}

#[test]
fn the_store_cannot_be_reached_through_the_mount() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| std::fs::write(d.join("f"), "x\n").expect("write"));
    m.turn(2);
    m.sh("echo y > f");
    for attack in [
        "cat .ckpt/journal.jsonl",
        "cat .ckpt/../.ckpt/VERSION",
        "ls .ckpt/blobs",
        "rm -rf .ckpt",
        "mv .ckpt stolen",
        "ln .ckpt/turn stolen",
        "chmod 777 .ckpt",
        "touch .ckpt/new",
        "mkdir .ckpt/blobs",
        "ln -s x .ckpt/link",
        "mv f .ckpt/f",
    ] {
        let o = m.sh_output(attack);
        assert!(!o.status.success(), "{attack} succeeded");
    }
    let listing = m.sh("ls -a .ckpt");
    assert_eq!(
        listing.split_whitespace().collect::<Vec<_>>(),
        vec![".", "..", ".gitignore", "rewind", "turn", "turns"]
    );
    let found = m.sh("find . -name 'journal*' -o -name VERSION | wc -l");
    assert_eq!(found.trim(), "0");
    m.unmount();
    assert!(m.dir.join(".ckpt/journal.jsonl").is_file());
    let o = m.cli(&["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    m.remount();
    m.rewind(2);
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("read"), "x\n");
}

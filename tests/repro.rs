//! The reproductions in `tests/repro/` (kept from ../shared/repro, where each was first
//! written): each script takes the binary from `BIN` and a folder, and prints `EXACT` last when
//! ckpt-mount keeps its promise. Each runs on root's mount (kernel passthrough) and on a
//! normal user's own mount (`fusermount3`, the daemon serving I/O), where users are.

mod common;
use common::user::{USER, UserArea, tier_runs};
use common::{bin, require_fuse, require_program};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The scripts, copied where every user can read them.
struct Scripts {
    dir: tempfile::TempDir,
}

impl Scripts {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("ckpt-repro-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/repro");
        let o = Command::new("cp")
            .arg("-r")
            .arg(src.join("."))
            .arg(dir.path())
            .output()
            .expect("cp");
        assert!(o.status.success(), "copy the scripts: {o:?}");
        for p in [
            dir.path().to_path_buf(),
            dir.path().join("hardlink_git_turns"),
        ] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Self { dir }
    }

    fn path(&self, script: &str) -> PathBuf {
        self.dir.path().join(script)
    }
}

/// What a run printed; asserts its last line is `EXACT`.
fn assert_exact(who: &str, script: &str, o: &std::process::Output) {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("command not found") && !out.contains("mount failed"),
        "{script} as {who} did not run the binary under test:\n{out}\n{err}"
    );
    assert_eq!(
        out.lines().last(),
        Some("EXACT"),
        "{script} as {who}:\nstdout:\n{out}\nstderr:\n{err}"
    );
}

/// Runs `script` as root on a folder of its own.
fn as_root(scripts: &Scripts, script: &str) {
    let area = tempfile::Builder::new()
        .prefix("ckpt-repro-root-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let folder = area.path().join("folder");
    let o = Command::new("bash")
        .arg(scripts.path(script))
        .arg(&folder)
        .env("BIN", bin())
        .current_dir("/")
        .output()
        .expect("bash");
    let _ = Command::new("umount").arg("-l").arg(&folder).output();
    assert_exact("root", script, &o);
}

/// Runs `script` as the normal user, on a folder in the user's scratch area.
fn as_user(scripts: &Scripts, area: &UserArea, script: &str) {
    // In the user's own folder: the scripts make theirs, and some write beside it.
    let folder = area
        .site
        .join(format!("repro-{}", script.replace(['/', '.'], "_")));
    let o = area.sh_as(
        USER,
        &format!(
            "cd / && BIN=\"$ck\" bash '{}' '{}'",
            scripts.path(script).display(),
            folder.display()
        ),
    );
    let _ = Command::new("umount").arg("-l").arg(&folder).output();
    assert_exact(USER, script, &o);
}

/// Runs `script` on both mounts.
fn both(script: &str) {
    if !require_fuse() || !require_program("git") {
        return;
    }
    let scripts = Scripts::new();
    as_root(&scripts, script);
    if let Some((uid, gid)) = tier_runs() {
        let area = UserArea::new(uid, gid);
        as_user(&scripts, &area, script);
    }
}

#[test]
fn hard_link_trees_survive_two_rewinds_on_both_mounts() {
    both("hardlink_user_mount.sh");
}

#[test]
fn hard_link_groups_survive_five_turns_of_git_work_on_both_mounts() {
    both("hardlink_git_turns/hardlink_git_turns.sh");
}

#[test]
fn a_partial_rewind_leaves_an_existing_parent_as_it_is_on_both_mounts() {
    both("partial_parent_mode.sh");
}

#[test]
fn a_recycled_inode_number_is_never_an_anchor_on_both_mounts() {
    both("anchor_clobber.sh");
}

#[test]
fn a_held_file_is_never_written_into_by_number_on_both_mounts() {
    both("held_victim.sh");
}

#[test]
fn orig_head_is_never_written_into_by_number_on_both_mounts() {
    both("orig_head_victim.sh");
}

#[test]
fn a_link_replaced_by_its_own_bytes_is_found_by_a_later_rewind_on_both_mounts() {
    both("hardlink_same_bytes.sh");
}

#[test]
fn a_failed_rename_of_a_hard_linked_tree_rewrites_nothing_on_both_mounts() {
    both("hardlink_failed_rename.sh");
}

#[test]
fn a_tree_deeper_than_path_max_is_rewound_and_undone_on_both_mounts() {
    both("deep_tree.sh");
}

/// Root's only: it mounts with `--allow-other` (a user may not without `user_allow_other` in
/// /etc/fuse.conf) and compares set-id, ACL and device behaviour with ext4, which the user's
/// tests of `tests/ext4_semantics.rs` and `tests/non_root.rs` cover on the user's mount.
#[test]
fn seven_behaviours_compared_with_ext4_on_roots_mount() {
    // xfs_io has no --version (require_program's probe): asked for by name; CI installs it.
    let xfs_io = Command::new("sh")
        .args(["-c", "command -v xfs_io"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        xfs_io || std::env::var("CI").as_deref() != Ok("true"),
        "xfs_io (xfsprogs) is missing: .ci/run installs it"
    );
    if !require_fuse() || !require_program("setfacl") || !xfs_io {
        return;
    }
    as_root(&Scripts::new(), "fuse_semantics.sh");
}

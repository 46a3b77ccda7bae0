//! Crashes at named points, not at random moments: the daemon is built with the feature
//! `failpoints` and started with `CKPT_FAILPOINT=NAME[:N]`, so it kills itself (`SIGKILL`)
//! exactly there (see `src/failpoint.rs`). Before each crash the folder is listed and a shell
//! sits in it, as where users are (a listed directory is opened by the kernel alone, and a
//! shell keeps the dead mount busy). After each crash: `status` says the mount is dead and names
//! the one command that recovers, `fsck` is clean, that command (`mount DIR`) detaches the dead
//! mount and completes what was cut off (a rewind), and a rewind to the start of the turn is
//! exact, with nothing left behind in the folder or the store.

mod common;
use common::{Mounted, Node, assert_same_tree, bin, require_fuse, tree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A folder mounted by a daemon that dies at `point`, with a shell sitting in it.
struct Crashable {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    resident: std::process::Child,
}

impl Drop for Crashable {
    fn drop(&mut self) {
        let _ = self.resident.kill();
        let _ = self.resident.wait();
    }
}

impl Crashable {
    fn new(point: &str, setup: impl FnOnce(&Path)) -> (Self, Mounted) {
        Self::mount(Some(point), setup)
    }

    /// The daemon mounted with no crash point armed: the test kills it by hand.
    fn killed_by_hand(setup: impl FnOnce(&Path)) -> (Self, Mounted) {
        Self::mount(None, setup)
    }

    fn mount(point: Option<&str>, setup: impl FnOnce(&Path)) -> (Self, Mounted) {
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-crash-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let dir = tmp.path().join("project");
        std::fs::create_dir(&dir).expect("mkdir");
        setup(&dir);
        let mut mount = Command::new(bin());
        mount.arg("mount").arg(&dir);
        if let Some(point) = point {
            mount.env("CKPT_FAILPOINT", point);
        }
        let o = mount.output().expect("mount");
        assert!(
            o.status.success(),
            "mount: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let m = Mounted::attach(&dir);
        // A shell whose working directory is the mounted folder, as a user's terminal is.
        let resident = Command::new("sh")
            .args(["-c", "exec sleep 3600"])
            .current_dir(&dir)
            .spawn()
            .expect("a shell in the folder");
        (
            Self {
                _tmp: tmp,
                dir,
                resident,
            },
            m,
        )
    }

    /// Lists the whole folder through the mount (after which the kernel opens its directories
    /// without asking the daemon) and gives the daemon's pid, before a crash.
    fn arm(&self) -> u32 {
        let o = Command::new("ls")
            .arg("-laR")
            .arg(&self.dir)
            .output()
            .expect("ls");
        assert!(o.status.success(), "ls -laR: {}", common::output_text(&o));
        common::daemon_pid(&self.dir)
    }

    /// Waits for the daemon to have died at its failpoint, then detaches the dead mount.
    fn wait_dead(&self, pid: u32, point: &str) {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        for _ in 0..2000 {
            if !proc_dir.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !proc_dir.exists(),
            "the daemon never reached failpoint {point}"
        );
        // The mount is dead, its folder listed and a shell still in it: `status` says so and
        // names the command that recovers.
        let o = Command::new(bin())
            .args(["status", "--dir"])
            .arg(&self.dir)
            .output()
            .expect("status");
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "status of a dead mount: {said}");
        let recover = format!("recover with: ckpt-mount mount {}", self.dir.display());
        assert!(
            said.contains("dead mount") && said.contains(&recover),
            "after {point}, status says: {said}"
        );
    }

    /// `mount DIR` on the dead mount: it detaches it and mounts again, saying so.
    fn recover(&self) -> Mounted {
        let o = Command::new(bin())
            .arg("mount")
            .arg(&self.dir)
            .output()
            .expect("mount");
        let said = common::output_text(&o);
        assert!(o.status.success(), "mount over the dead mount: {said}");
        assert!(said.contains("was a dead mount"), "mount says: {said}");
        Mounted::attach(&self.dir)
    }

    /// Runs `cut`, the command the daemon dies under at `point` (it must fail: "the {what}
    /// was cut off"), waits for the death, checks the store and mounts again: the remount
    /// completes what was cut off, leaving no temporary file in the folder.
    fn cut_off(
        &self,
        m: Mounted,
        point: &str,
        what: &str,
        cut: impl FnOnce(&Mounted) -> Output,
    ) -> Mounted {
        let pid = self.arm();
        let o = cut(&m);
        assert!(!o.status.success(), "the {what} was cut off");
        self.wait_dead(pid, point);
        std::mem::forget(m); // the dead mount is the recovery's to detach
        let m = self.recover();
        self.fsck_clean(point);
        no_temp_files(&self.dir);
        m
    }

    fn fsck_clean(&self, point: &str) {
        let o = Command::new(bin())
            .args(["fsck", "--dir"])
            .arg(&self.dir)
            .output()
            .expect("fsck");
        assert!(
            o.status.success(),
            "after {point}: fsck: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

fn no_temp_files(dir: &Path) {
    let found = tree(dir, true)
        .keys()
        .filter(|k| {
            k.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with(".ckpt-rewind-"))
        })
        .cloned()
        .collect::<Vec<_>>();
    assert!(found.is_empty(), "temp files left in the folder: {found:?}");
}

/// The store's `staged/` and temp files: nothing may be left once the store has opened.
fn store_leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["staged", "blobs"] {
        let p = dir.join(".ckpt").join(sub);
        for e in std::fs::read_dir(&p).expect("read store dir").flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if sub == "staged" || n.starts_with(".tmp-") {
                out.push(format!("{sub}/{n}"));
            }
        }
    }
    out
}

/// A crash during a mutation's capture: the mutation either happened after its capture or
/// not at all, and the rewind to the turn's start gives back the snapshot.
fn crash_in_capture(point: &str, setup: impl FnOnce(&Path), act: &str) {
    let (c, m) = Crashable::new(point, setup);
    m.turn(2);
    let at2: BTreeMap<String, Node> = tree(&c.dir, false);
    let pid = c.arm();
    let _ = m.sh_output(act); // fails: the daemon dies under it
    c.wait_dead(pid, point);
    std::mem::forget(m); // the dead mount is the recovery's to detach
    let mut m = c.recover();
    c.fsck_clean(point);
    m.rewind(2);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
    // Opening the store stored or dropped whatever the crash left in it.
    let left = store_leftovers(&c.dir);
    assert!(
        left.is_empty(),
        "after {point}, left in the store: {left:?}"
    );
}

#[test]
fn killed_after_a_removal_was_recorded_and_before_the_file_moved_into_the_store() {
    if !require_fuse() {
        return;
    }
    crash_in_capture(
        "stage-after-record",
        |d| std::fs::write(d.join("victim"), "bytes at the start of turn 2\n").expect("write"),
        "rm victim",
    );
}

/// `kill -9` right after a turn's first write to an empty file: its pre-image is the empty
/// blob, which adds an index line to the packs and no data. That line once waited for the next
/// non-empty blob and died with the daemon, leaving a record naming a blob that was not there
/// (`blob-missing` of e3b0c44298fc, first seen in `tests/faults.rs`).
#[test]
fn killed_right_after_an_empty_files_capture() {
    if require_fuse() {
        kill_right_after_an_empty_files_capture();
    }
}

/// The same on a normal user's own mount: this test binary runs again as the user `ckpt-ci`.
#[test]
fn killed_right_after_an_empty_files_capture_on_a_users_mount() {
    if common::user::in_user_run() {
        kill_right_after_an_empty_files_capture();
    } else if require_fuse() {
        common::user::rerun_as_user("killed_right_after_an_empty_files_capture_on_a_users_mount");
    }
}

fn kill_right_after_an_empty_files_capture() {
    let (c, m) = Crashable::killed_by_hand(|d| {
        std::fs::write(d.join("empty"), "").expect("write");
        std::fs::write(d.join("other"), "other\n").expect("write");
    });
    m.turn(2);
    let at2: BTreeMap<String, Node> = tree(&c.dir, false);
    let pid = c.arm();
    m.sh("echo now > empty");
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    c.wait_dead(pid, "kill -9");
    std::mem::forget(m); // the dead mount is the recovery's to detach
    let mut m = c.recover();
    c.fsck_clean("kill -9");
    m.rewind(2);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean("kill -9");
}

#[test]
fn killed_between_a_loose_blob_and_its_rename() {
    if !require_fuse() {
        return;
    }
    crash_in_capture(
        "blob-before-rename",
        |d| std::fs::write(d.join("big.bin"), vec![7u8; 300_000]).expect("write"),
        "echo more >> big.bin",
    );
}

#[test]
fn killed_between_pack_data_and_its_index_line() {
    if !require_fuse() {
        return;
    }
    crash_in_capture(
        "pack-after-data",
        |d| std::fs::write(d.join("small"), "small file\n").expect("write"),
        "echo more >> small",
    );
}

/// A crash in the middle of a rewind: the remount completes it before anything else.
fn crash_in_rewind(point: &str) {
    let (c, m) = Crashable::new(point, |d| {
        for i in 0..6 {
            std::fs::write(d.join(format!("f{i}")), format!("file {i} at turn 2\n")).expect("w");
        }
        std::fs::create_dir(d.join("sub")).expect("mkdir");
        std::fs::write(d.join("sub/inner"), "inner\n").expect("write");
    });
    m.turn(2);
    let at2 = tree(&c.dir, false);
    m.sh("rm f0 f1; echo changed > f2; echo more >> f3; mkdir new; echo n > new/x; rm -r sub");
    let mut m = c.cut_off(m, point, "rewind", |m| m.cli(&["rewind", "2"]));
    // The remount completed the rewind that was cut off.
    assert_same_tree(&at2, &tree(&c.dir, false));
    let turn = std::fs::read_to_string(c.dir.join(".ckpt/turn")).expect("turn");
    assert_eq!(turn.trim(), "2");
    // And it stays undoable: the undo gives back the state before the rewind.
    m.turn(3);
    m.rewind(3);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

#[test]
fn killed_after_three_steps_of_a_rewind() {
    if !require_fuse() {
        return;
    }
    crash_in_rewind("rewind-step:3");
}

#[test]
fn killed_between_a_rewind_temp_file_and_its_rename() {
    if !require_fuse() {
        return;
    }
    crash_in_rewind("rewind-before-rename");
}

/// A whole rewind to turn 2 cut off by a crash at `point`, on a folder then left unmounted (the
/// dead mount detached, as a reboot leaves it): the crashable folder and the tree at turn 2.
fn cut_off_and_left_unmounted(point: &str) -> (Crashable, BTreeMap<String, Node>) {
    let (c, m) = Crashable::new(point, |d| {
        for i in 0..6 {
            std::fs::write(d.join(format!("f{i}")), format!("file {i} at turn 2\n")).expect("w");
        }
    });
    m.turn(2);
    let at2 = tree(&c.dir, false);
    m.sh("rm f0 f1; echo changed > f2; echo more >> f3; mkdir new; echo n > new/x");
    let pid = c.arm();
    assert!(
        !m.cli(&["rewind", "2"]).status.success(),
        "the rewind was cut off"
    );
    c.wait_dead(pid, point);
    std::mem::forget(m); // detached below
    let o = Command::new("umount")
        .arg("-l")
        .arg(&c.dir)
        .output()
        .expect("umount -l");
    assert!(o.status.success(), "{}", common::output_text(&o));
    (c, at2)
}

/// A rewind cut off by a crash on a folder then left unmounted: `status` names the rewind and
/// the command that completes it, and the `mount` that completes it says so in one line; the
/// folder is then exact.
#[test]
fn status_names_a_cut_off_rewind_and_the_mount_that_completes_it_says_so() {
    if !require_fuse() {
        return;
    }
    let point = "rewind-step:3";
    let (c, at2) = cut_off_and_left_unmounted(point);
    let dir = c.dir.display().to_string();
    let status = |json: bool| {
        let mut cmd = Command::new(bin());
        cmd.arg("status")
            .args(json.then_some("--json"))
            .args(["--dir", &dir]);
        cmd.output().expect("status")
    };
    let o = status(false);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", common::output_text(&o));
    assert!(said.contains("mounted:  no"), "{said}");
    let pending = format!(
        "pending:  a rewind to turn 2 was cut off by a crash (or stopped by a path it could not restore); `ckpt-mount mount {dir}` completes it"
    );
    assert!(
        said.contains(&pending),
        "status of the unmounted folder: {said}"
    );
    let v: serde_json::Value = serde_json::from_slice(&status(true).stdout).expect("json");
    assert_eq!(v["pending"]["kind"], "rewind", "{v}");
    assert_eq!(v["pending"]["to"], 2, "{v}");
    // The mount completes it, and says so.
    let o = Command::new(bin())
        .args(["mount", &dir])
        .output()
        .expect("mount");
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{}", common::output_text(&o));
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.starts_with("ckpt-mount: completed the rewind to turn 2 that was cut off (")
            && said.contains(" restored, ")
            && said.contains(" deleted)"),
        "mount says: {said}"
    );
    let mut m = Mounted::attach(&c.dir);
    assert_same_tree(&at2, &tree(&c.dir, false));
    let v: serde_json::Value = serde_json::from_slice(&status(true).stdout).expect("json");
    assert!(v["pending"].is_null(), "nothing pending once mounted: {v}");
    m.unmount();
    c.fsck_clean(point);
}

/// A rewind killed half-way through a run of files it restores in parts on several threads
/// (4,200 files rewritten in place at one depth): whichever files each thread had done, the
/// remount completes it exactly, and it stays undoable.
#[test]
fn killed_half_way_through_files_restored_in_parts() {
    if !require_fuse() {
        return;
    }
    let point = "rewind-step:2500";
    let (c, m) = Crashable::new(point, |d| {
        for dir in ["a", "b"] {
            std::fs::create_dir(d.join(dir)).expect("mkdir");
            for i in 0..2100 {
                let text = format!("{dir}/{i} at turn 2\n").repeat(i % 3 + 1);
                std::fs::write(d.join(format!("{dir}/f{i:04}")), text).expect("write");
            }
        }
    });
    m.turn(2);
    let at2 = tree(&c.dir, false);
    m.sh("for f in a/* b/*; do echo rewritten > $f; done");
    let before = tree(&c.dir, false);
    let mut m = c.cut_off(m, point, "rewind", |m| m.cli(&["rewind", "2"]));
    assert_same_tree(&at2, &tree(&c.dir, false));
    let o = m.cli(&["rewind", "--undo"]);
    assert!(o.status.success(), "{}", common::output_text(&o));
    assert_same_tree(&before, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// The state a crash test of the operation log starts from: turn 2 begun over `f0`…`f3` and
/// `sub/inner`, then changed by shell tools. Returns the tree at the start of turn 2 and the
/// tree just before the rewind to 2.
fn changed_turn_two(
    c: &Crashable,
    m: &Mounted,
) -> (BTreeMap<String, Node>, BTreeMap<String, Node>) {
    m.turn(2);
    let at2 = tree(&c.dir, false);
    m.sh("rm f0; echo changed > f2; echo more >> f3; mkdir new; echo n > new/x; rm -r sub");
    (at2, tree(&c.dir, false))
}

fn four_files(d: &Path) {
    for i in 0..4 {
        std::fs::write(d.join(format!("f{i}")), format!("file {i} at turn 2\n")).expect("w");
    }
    std::fs::create_dir(d.join("sub")).expect("mkdir");
    std::fs::write(d.join("sub/inner"), "inner\n").expect("write");
}

/// A crash in the middle of an undo: the remount completes it, and it can be redone.
#[test]
fn killed_in_an_undo_after_its_saves() {
    if !require_fuse() {
        return;
    }
    let point = "undo-after-saves";
    let (c, m) = Crashable::new(point, four_files);
    let (at2, before_rewind) = changed_turn_two(&c, &m);
    m.rewind(2);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.sh("echo after the rewind > f1");
    let before_undo = tree(&c.dir, false);
    let mut m = c.cut_off(m, point, "undo", |m| m.cli(&["undo"]));
    // The remount completed the undo.
    assert_same_tree(&before_rewind, &tree(&c.dir, false));
    let o = m.cli(&["redo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&before_undo, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// A crash in the middle of a redo: the remount completes it, and it can be undone.
#[test]
fn killed_in_a_redo_after_its_saves() {
    if !require_fuse() {
        return;
    }
    let point = "redo-after-saves";
    let (c, m) = Crashable::new(point, four_files);
    let (at2, before_rewind) = changed_turn_two(&c, &m);
    m.rewind(2);
    m.sh("echo after the rewind > f1");
    let before_undo = tree(&c.dir, false);
    let o = m.cli(&["undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&before_rewind, &tree(&c.dir, false));
    let mut m = c.cut_off(m, point, "redo", |m| m.cli(&["redo"]));
    assert_same_tree(&before_undo, &tree(&c.dir, false));
    let o = m.cli(&["undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&before_rewind, &tree(&c.dir, false));
    // The history is whole: the rewind to 2 still gives its start.
    m.rewind(2);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// A crash in a partial rewind after its saves: the remount completes it, and it can be
/// undone exactly.
#[test]
fn killed_in_a_partial_rewind_after_its_saves() {
    if !require_fuse() {
        return;
    }
    let point = "partial-after-saves";
    let (c, m) = Crashable::new(point, four_files);
    let (at2, before) = changed_turn_two(&c, &m);
    let mut m = c.cut_off(m, point, "partial rewind", |_| {
        Command::new(bin())
            .args(["rewind", "2", "-y", "--dir"])
            .arg(&c.dir)
            .args(["--", "sub", "f2"])
            .output()
            .expect("rewind")
    });
    let now = tree(&c.dir, false);
    for p in ["sub", "sub/inner", "f2"] {
        assert_eq!(now.get(p), at2.get(p), "{p} rewound by the completed run");
    }
    assert_eq!(now.get("f3"), before.get("f3"), "f3 left as it was");
    let o = m.cli(&["undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&before, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// A crash in an `op restore` after its saves: the remount completes it (the folder as just
/// after turn 2 began, the turns untouched), and `undo` takes it back exactly.
#[test]
fn killed_in_an_op_restore_after_its_saves() {
    if !require_fuse() {
        return;
    }
    let point = "restore-op-after-saves";
    let (c, m) = Crashable::new(point, four_files);
    let (at2, before) = changed_turn_two(&c, &m);
    // #1 created the store, #2 began turn 2.
    let mut m = c.cut_off(m, point, "op restore", |m| {
        m.cli(&["op", "restore", "2", "--yes"])
    });
    assert_same_tree(&at2, &tree(&c.dir, false));
    let o = m.cli(&["status", "--json"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"turn\": 2"),
        "{}",
        common::output_text(&o)
    );
    let o = m.cli(&["undo"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&before, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// The same crash on a normal user's own mount (`fusermount3`, the daemon serving I/O): the
/// folder listed and a shell in it, the daemon killed in the middle of a rewind; `status` says
/// the mount is dead and names the command, which detaches it through `fusermount3` and
/// completes the rewind exactly.
#[test]
fn a_normal_users_daemon_killed_in_a_rewind_after_a_listing_is_recovered_by_mount() {
    use common::user::{UserArea, tier_runs};
    if !require_fuse() {
        return;
    }
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    area.sh(
        "cd site && for i in 0 1 2 3 4 5; do echo \"file $i at turn 2\" > f$i; done \
         && mkdir sub && echo inner > sub/inner",
    );
    // Read before the mount and after the unmount: without allow_other, root cannot read the
    // user's mount.
    let at2 = tree(&area.site, false);
    area.sh("CKPT_FAILPOINT=rewind-step:3 $ck mount site >/dev/null && echo 2 > site/.ckpt/turn");
    area.sh("cd site && rm f0 f1 && echo changed > f2 && mkdir new && echo n > new/x && rm -r sub");
    let pid = area.sh("$ck status --json --dir site | sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'");
    // Listed, and a shell left in the folder.
    area.sh("ls -laR site >/dev/null && (cd site && exec sleep 611) </dev/null >/dev/null 2>&1 &");
    let cut = area.sh_as(common::user::USER, "$ck rewind 2 -y --dir site");
    assert!(!cut.status.success(), "the rewind was cut off");
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    for _ in 0..2000 {
        if !proc_dir.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(!proc_dir.exists(), "the daemon never reached its failpoint");
    let o = area.sh_as(common::user::USER, "$ck status --dir site");
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(
        said.contains("dead mount") && said.contains("recover with: ckpt-mount mount"),
        "status of the user's dead mount: {said}"
    );
    let out = area.sh("$ck mount site 2>&1");
    assert!(out.contains("was a dead mount"), "{out}");
    area.sh("$ck unmount site; pkill -u \"$(id -u)\" -x -f 'sleep 611' || true");
    assert_same_tree(&at2, &tree(&area.site, false));
}

/// `undo --dry-run`, `redo --dry-run` and `rewind --dry-run` on an unmounted folder whose whole
/// rewind a crash cut off preview the completion and change nothing: not the folder, not the
/// store (an undo once carried the cut-off rewind out, preview or not).
#[test]
fn a_preview_on_an_unmounted_folder_with_a_cut_off_rewind_changes_nothing() {
    if !require_fuse() {
        return;
    }
    let point = "rewind-step:3";
    let (c, at2) = cut_off_and_left_unmounted(point);
    let folder = tree(&c.dir, false);
    assert_ne!(folder, at2, "the crash left the rewind half done");
    let store = tree(&c.dir.join(".ckpt"), false);
    for args in [
        &["undo", "--dry-run"][..],
        &["redo", "--dry-run"],
        &["rewind", "1", "--dry-run"],
    ] {
        let o = Command::new(bin())
            .args(args)
            .arg("--dir")
            .arg(&c.dir)
            .output()
            .expect("preview");
        let said = common::output_text(&o);
        assert!(o.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("cut off"),
            "{args:?} names the cut-off rewind: {said}"
        );
        assert_same_tree(&folder, &tree(&c.dir, false));
        assert_eq!(
            store,
            tree(&c.dir.join(".ckpt"), false),
            "{args:?} left the store as it was"
        );
    }
    let o = Command::new(bin())
        .arg("mount")
        .arg(&c.dir)
        .output()
        .expect("mount");
    assert!(o.status.success(), "{}", common::output_text(&o));
    let mut m = Mounted::attach(&c.dir);
    assert_same_tree(&at2, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

/// A crash in a merging `rewind --agent NAME --conflicts merge` after its saves: the remount
/// completes it with the merged bytes journaled with it (the agent's line taken back, the
/// user's kept), not with the file's state at the start of the turn; undo gives back the file
/// as it was before the run.
#[test]
fn killed_in_a_merging_agent_rewind_after_its_saves() {
    if !require_fuse() {
        return;
    }
    let point = "partial-after-saves";
    let (c, m) = Crashable::new(point, |d| {
        std::fs::write(d.join("doc.txt"), "one\ntwo\nthree\nfour\nfive\n").expect("doc");
    });
    m.turn(2);
    let run = |args: &[&str], script: &str| {
        let o = Command::new(bin())
            .args(args)
            .args(["--dir"])
            .arg(&c.dir)
            .args(["--", "sh", "-ec", script])
            .current_dir(&c.dir)
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", common::output_text(&o));
    };
    run(&["run", "--as", "bot"], "sed -i s/one/ONE/ doc.txt");
    let user = Command::new("sh")
        .args([
            "-ec",
            "sed s/five/FIVE/ doc.txt > .doc.swp && mv .doc.swp doc.txt",
        ])
        .current_dir(&c.dir)
        .output()
        .expect("user");
    assert!(user.status.success(), "{}", common::output_text(&user));
    let before = tree(&c.dir, false);
    let mut m = c.cut_off(m, point, "merging rewind", |_| {
        Command::new(bin())
            .args([
                "rewind",
                "2",
                "--agent",
                "bot",
                "--conflicts",
                "merge",
                "-y",
                "--dir",
            ])
            .arg(&c.dir)
            .output()
            .expect("rewind")
    });
    assert_eq!(
        std::fs::read_to_string(c.dir.join("doc.txt")).expect("doc"),
        "one\ntwo\nthree\nfour\nFIVE\n",
        "the completed run gives the merge's bytes"
    );
    let o = m.cli(&["undo", "-y"]);
    assert!(o.status.success(), "{}", common::output_text(&o));
    assert_same_tree(&before, &tree(&c.dir, false));
    m.unmount();
    c.fsck_clean(point);
}

//! A normal user's own mount, for the tests that run as one: the account `ckpt-ci`, which
//! needs read-write access to `/dev/fuse` (`.ci/run` creates it and grants access with an ACL,
//! as a distribution's udev rule would with mode 0666). Without it the tier says so and skips;
//! under `CI=true` that is a failure.

use super::{bin, require_fuse};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

pub const USER: &str = "ckpt-ci";

/// The user's uid and gid, if the account exists.
fn account(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&name))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

pub fn tier_runs() -> Option<(u32, u32)> {
    if !require_fuse() {
        return None;
    }
    let who = account(USER);
    if who.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the non-root tier needs the account {USER} (.ci/run creates it)"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped (non-root tier): no account {USER}; .ci/run creates it"
        );
    }
    who
}

/// A scratch area the user owns, with a copy of the binary every user can run (the build's
/// own directory may sit where the user cannot reach). Dropping it detaches what is still
/// mounted there and removes it.
pub struct UserArea {
    pub root: tempfile::TempDir,
    pub site: PathBuf,
    pub bin: PathBuf,
}

impl UserArea {
    pub fn new(uid: u32, gid: u32) -> Self {
        let root = tempfile::Builder::new()
            .prefix("ckpt-nonroot-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let bin_copy = root.path().join("ckpt-mount");
        std::fs::copy(bin(), &bin_copy).expect("copy binary");
        std::fs::set_permissions(&bin_copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let site = root.path().join("site");
        std::fs::create_dir(&site).expect("mkdir");
        std::os::unix::fs::chown(&site, Some(uid), Some(gid)).expect("chown");
        Self {
            root,
            site,
            bin: bin_copy,
        }
    }

    /// Runs `script` with `sh -e` as the user, in the scratch area, `ck` naming the binary.
    pub fn sh_as(&self, user: &str, script: &str) -> Output {
        Command::new("runuser")
            .args(["-u", user, "--", "env"])
            .arg(format!("HOME={}", self.root.path().display()))
            .arg(format!("ck={}", self.bin.display()))
            .args(["sh", "-ec", script])
            .current_dir(self.root.path())
            .output()
            .expect("runuser")
    }

    pub fn sh(&self, script: &str) -> String {
        let o = self.sh_as(USER, script);
        assert!(
            o.status.success(),
            "as {USER}: {script}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for UserArea {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.site).output();
    }
}

/// Whether this process is the user's run of a test, started by [`rerun_as_user`].
pub fn in_user_run() -> bool {
    std::env::var("CKPT_USER_RUN").as_deref() == Ok("1")
}

/// Runs the test `name` of this very test binary again, as the user on the user's own mount:
/// the binary and ckpt-mount are copied where the user can run them, the `CKPT_*` settings
/// (seeds, case counts) and `CI` pass on, and the run must pass its one test. The test itself
/// calls this when [`in_user_run`] is false and runs its property when it is true, so one
/// property is checked on both mounts.
pub fn rerun_as_user(name: &str) {
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    let exe = std::env::current_exe().expect("the test binary");
    let copy = area.root.path().join("test-binary");
    std::fs::copy(&exe, &copy).expect("copy the test binary");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", USER, "--", "env"])
        .arg(format!("HOME={}", area.site.display()))
        .arg("CKPT_USER_RUN=1")
        .arg(format!("CKPT_TEST_BIN={}", area.bin.display()));
    for (k, v) in std::env::vars() {
        if k.starts_with("CKPT_") || ["CI", "PATH", "RUST_BACKTRACE"].contains(&k.as_str()) {
            cmd.arg(format!("{k}={v}"));
        }
    }
    let o = cmd
        .arg(&copy)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .current_dir(area.root.path())
        .output()
        .expect("runuser");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && out.contains("1 passed"),
        "{name} as {USER}, on the user's own mount:\nstdout:\n{out}\nstderr:\n{err}"
    );
    // What the user's run said of itself (counts, seeds, times) shows in this run too.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{name} as {USER}: {}",
        err.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("passed")
    );
}

//! Permission checks on a single-user mount, where the host filesystem decides them instead of
//! the kernel's `default_permissions` (one round trip per created or removed file fewer): a
//! normal user meets exactly the errors ext4 gives, for read-only files, directories without
//! search or write permission, sticky directories, files of other owners and ACLs.
//!
//! The same tree is made twice, as a plain folder and as a folder the user mounts through
//! `fusermount3`; the same script of operations runs as the user in both, and every result
//! (success or errno) must be the same. Needs the account `ckpt-ci` (see tests/non_root.rs).

mod common;
use common::{bin, require_fuse};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const USER: &str = "ckpt-ci";

fn account() -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&USER))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

/// The operations, each printed as `name: ok` or `name: ERRNO`.
const SCRIPT: &str = r#"
import errno, os, subprocess, sys
os.chdir(sys.argv[1])
def run(name, f):
    try:
        f()
        print(f"{name}: ok")
    except OSError as e:
        print(f"{name}: {errno.errorcode.get(e.errno, e.errno)}")
def write(p):
    with open(p, "a") as fh:
        fh.write("x")
run("read 0200 file", lambda: open("wo.txt").read())
run("write 0400 file", lambda: write("ro.txt"))
run("truncate 0400 file", lambda: os.truncate("ro.txt", 0))
run("exec 0644 file", lambda: subprocess.run(["./noexec.sh"]))
run("access W_OK 0400 file", lambda: (_ for _ in ()).throw(PermissionError(errno.EACCES, "")) if not os.access("ro.txt", os.W_OK) else None)
run("access X_OK 0555 dir", lambda: (_ for _ in ()).throw(PermissionError(errno.EACCES, "")) if not os.access("rx", os.X_OK) else None)
run("create in 0555 dir", lambda: open("rx/new.txt", "w").close())
run("mkdir in 0555 dir", lambda: os.mkdir("rx/d"))
run("unlink in 0555 dir", lambda: os.unlink("rx/f.txt"))
run("rename into 0555 dir", lambda: os.rename("moveme.txt", "rx/moved.txt"))
run("list 0311 dir", lambda: os.listdir("noread"))
run("stat in 0600 dir", lambda: os.stat("nosearch/f.txt"))
run("chdir into 0600 dir", lambda: (os.chdir("nosearch"), os.chdir("..")))
run("open in 0600 dir", lambda: open("nosearch/f.txt").read())
run("chmod file of root", lambda: os.chmod("roots.txt", 0o666))
run("utime explicit on file of root 0666", lambda: os.utime("roots666.txt", (1, 1)))
run("utime now on file of root 0666", lambda: os.utime("roots666.txt", None))
run("utime now on file of root 0644", lambda: os.utime("roots.txt", None))
run("write file of root 0644", lambda: write("roots.txt"))
run("unlink root's file in sticky dir", lambda: os.unlink("sticky/roots.txt"))
run("unlink own file in sticky dir", lambda: os.unlink("sticky/mine.txt"))
run("read file ACL-denied", lambda: open("acl.txt").read())
run("read file ACL-granted", lambda: open("acl-ok.txt").read())
run("chown own file to root", lambda: os.chown("mine.txt", 0, -1))
run("setxattr trusted", lambda: os.setxattr("mine.txt", "trusted.x", b"1"))
run("setxattr user on file of root", lambda: os.setxattr("roots666.txt", "user.x", b"1"))
"#;

/// Makes the tree the script expects in `dir`, owned by the user except where it says root.
fn make_tree(dir: &Path, uid: u32, gid: u32) {
    let w = |p: &str, mode: u32| {
        let path = dir.join(p);
        std::fs::write(&path, "data\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    let d = |p: &str| std::fs::create_dir(dir.join(p)).expect("mkdir");
    d("rx");
    d("noread");
    d("nosearch");
    d("sticky");
    w("wo.txt", 0o200);
    w("ro.txt", 0o400);
    w("noexec.sh", 0o644);
    w("rx/f.txt", 0o644);
    w("moveme.txt", 0o644);
    w("nosearch/f.txt", 0o644);
    w("sticky/mine.txt", 0o644);
    w("mine.txt", 0o644);
    w("acl.txt", 0o644);
    w("acl-ok.txt", 0o600);
    for p in [
        "",
        "rx",
        "noread",
        "nosearch",
        "wo.txt",
        "ro.txt",
        "noexec.sh",
        "rx/f.txt",
        "moveme.txt",
        "nosearch/f.txt",
        "sticky/mine.txt",
        "mine.txt",
    ] {
        std::os::unix::fs::chown(dir.join(p), Some(uid), Some(gid)).expect("chown");
    }
    // Root's files, and a sticky directory of root's that everyone may write.
    w("roots.txt", 0o644);
    w("roots666.txt", 0o666);
    w("sticky/roots.txt", 0o644);
    for (p, mode) in [
        ("rx", 0o555),
        ("noread", 0o311),
        ("nosearch", 0o600),
        ("sticky", 0o1777),
    ] {
        std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(mode))
            .expect("chmod dir");
    }
    // ACLs on root's files: one denies the user what "other" allows, one grants what the mode
    // does not.
    let setfacl = |spec: &str, p: &str| {
        let ok = Command::new("setfacl")
            .args(["-m", spec])
            .arg(dir.join(p))
            .status()
            .expect("setfacl");
        assert!(ok.success(), "setfacl {spec} {p}");
    };
    setfacl(&format!("u:{USER}:---"), "acl.txt");
    setfacl(&format!("u:{USER}:r--"), "acl-ok.txt");
}

fn run_as_user(dir: &Path, script: &Path) -> String {
    let o = Command::new("runuser")
        .args(["-u", USER, "--", "python3"])
        .arg(script)
        .arg(dir)
        .output()
        .expect("runuser python3");
    assert!(
        o.status.success(),
        "script failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Unmounts (lazily, as root) when dropped.
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0).output();
    }
}

#[test]
fn a_single_user_mount_gives_the_same_permission_errors_as_ext4() {
    if !require_fuse() {
        return;
    }
    let Some((uid, gid)) = account() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the permission matrix needs the account {USER} (.ci/run creates it)"
        );
        eprintln!("skipped: no account {USER}");
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-perm-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = tmp.path().join("ops.py");
    std::fs::write(&script, SCRIPT).expect("script");
    let ck = tmp.path().join("ckpt-mount");
    std::fs::copy(bin(), &ck).expect("copy binary");
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (plain, site) = (tmp.path().join("plain"), tmp.path().join("site"));
    for d in [&plain, &site] {
        std::fs::create_dir(d).expect("mkdir");
        make_tree(d, uid, gid);
    }
    let want = run_as_user(&plain, &script);
    let mount = Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(&ck)
        .arg("mount")
        .arg(&site)
        .output()
        .expect("mount");
    assert!(
        mount.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&mount.stderr)
    );
    let _unmount = Unmount(&site);
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == site.to_str())
        .expect("the mount");
    assert!(
        !line.contains("default_permissions"),
        "a single-user mount leaves permissions to the host: {line}"
    );
    let got = run_as_user(&site, &script);
    // The cases must mean something: most are refusals.
    let refused = want.lines().filter(|l| !l.ends_with(": ok")).count();
    assert!(refused >= 18, "too few refusals on ext4 itself:\n{want}");
    assert_eq!(
        got, want,
        "the mount's results (left) differ from ext4's (right)"
    );
}

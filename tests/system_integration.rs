//! mount-scripts/ and the service manager, as a user sets them up: two `ckpt-shell`s on one
//! folder, the fstab helper run the way mount(8) runs it (minimal PATH, `-o` options), the
//! daemon's READY=1 to `$NOTIFY_SOCKET` (what systemd's `Type=notify` waits for), and the unit's
//! recovery of a dead mount.

mod common;
use common::mount_script as script;
use common::output_text as text;
use common::{Mounted, bin, daemon_pid, require_fuse};
use std::io::Write;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ckpt-sys-")
        .tempdir_in("/tmp")
        .expect("tempdir")
}

/// Whether ckpt-mount has `dir` mounted, from this process's mountinfo.
fn is_mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|l| {
            l.split(' ').nth(4) == Some(&dir.display().to_string()) && l.contains("ckpt-mount")
        })
}

/// Detaches `dir` when dropped, if it is still mounted: a test that failed midway leaves no
/// mount behind (where the test unmounts it itself, this does nothing).
struct Detach(PathBuf);

impl Drop for Detach {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

fn unmount(dir: &Path) {
    let o = Command::new(bin())
        .arg("unmount")
        .arg(dir)
        .output()
        .expect("unmount");
    assert!(o.status.success(), "{}", text(&o));
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// PATH with the binary under test first.
fn path_with_bin() -> String {
    let dir = Path::new(bin()).parent().expect("bin dir").to_path_buf();
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display())
}

/// A `ckpt-shell` on `dir` reading its commands from a pipe.
fn ckpt_shell(dir: &Path, home: &Path) -> std::process::Child {
    Command::new("bash")
        .arg(script("ckpt-shell"))
        .arg(dir)
        .env("HOME", home)
        .env("PATH", path_with_bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ckpt-shell")
}

#[test]
fn a_second_ckpt_shell_on_a_mounted_folder_works_and_leaves_the_mount_to_the_first() {
    if !require_fuse() {
        return;
    }
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("keep.txt"), "keep\n").expect("write");
    let mut first = ckpt_shell(&dir, tmp.path());
    let _guard = Detach(dir.clone());
    let mut first_in = first.stdin.take().expect("stdin");
    writeln!(first_in, "echo 2 > .ckpt/turn && echo one > one.txt").expect("first shell");
    wait_for("the first shell's change", || {
        std::fs::read_to_string(dir.join("one.txt")).is_ok_and(|s| s == "one\n")
    });
    assert!(is_mounted(&dir));

    let mut second = ckpt_shell(&dir, tmp.path());
    let mut second_in = second.stdin.take().expect("stdin");
    writeln!(second_in, "rm keep.txt && echo two > two.txt\nexit").expect("second shell");
    drop(second_in);
    let out = second.wait_with_output().expect("second shell");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("already mounted"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("two.txt")).expect("two"),
        "two\n"
    );
    // The second shell worked inside the mount (its removal was captured) and left it mounted.
    assert!(
        is_mounted(&dir),
        "the second shell unmounted the first one's folder"
    );
    let o = Command::new(bin())
        .args(["rewind", "2", "--dir"])
        .arg(&dir)
        .output()
        .expect("rewind");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).expect("keep"),
        "keep\n"
    );

    writeln!(first_in, "exit").expect("first shell");
    drop(first_in);
    let out = first.wait_with_output().expect("first shell");
    assert!(out.status.success(), "{}", text(&out));
    assert!(!is_mounted(&dir), "the first shell leaves its mount behind");
}

/// A directory holding a copy of the fstab helper, as /sbin holds it.
fn helper_in(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    let helper = dir.join("mount.fuse.ckpt-mount");
    std::fs::copy(script("mount.fuse.ckpt-mount"), &helper).expect("copy helper");
    helper
}

/// Runs the helper as mount(8) does: `SOURCE MOUNTPOINT -o OPTIONS`, a minimal PATH.
fn run_helper(helper: &Path, dir: &Path, opts: &str, home: &Path) -> Output {
    Command::new(helper)
        .arg(dir)
        .arg(dir)
        .args(["-o", opts])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", home)
        .output()
        .expect("run helper")
}

/// The daemon's pid: the one `mount` printed, which must be the one `status` names.
fn mounted_daemon_pid(mount_output: &Output, dir: &Path) -> u32 {
    let out = String::from_utf8_lossy(&mount_output.stdout);
    let printed: u32 = out
        .split("daemon pid ")
        .nth(1)
        .and_then(|s| {
            s.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no daemon pid in {out:?}"));
    assert_eq!(printed, daemon_pid(dir), "mount printed another pid");
    printed
}

/// The daemon's command line.
fn daemon_cmdline(mount_output: &Output, dir: &Path) -> String {
    let pid = mounted_daemon_pid(mount_output, dir);
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .expect("cmdline")
        .replace('\0', " ")
}

#[test]
fn the_fstab_helper_finds_the_binary_off_path_and_maps_its_options() {
    if !require_fuse() {
        return;
    }
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    // Beside the helper, as when both are installed in one directory.
    let sbin = tmp.path().join("sbin");
    let helper = helper_in(&sbin);
    std::os::unix::fs::symlink(bin(), sbin.join("ckpt-mount")).expect("symlink");
    let o = run_helper(
        &helper,
        &dir,
        "defaults,noauto,user,nofail,x-systemd.automount,max_blob=1K,compress,threads=2",
        tmp.path(),
    );
    let _guard = Detach(dir.clone());
    assert!(o.status.success(), "{}", text(&o));
    assert!(is_mounted(&dir));
    let cmdline = daemon_cmdline(&o, &dir);
    for flag in ["--max-blob=1024", "--compress", "--threads=2"] {
        assert!(cmdline.contains(flag), "{flag} missing from {cmdline}");
    }
    unmount(&dir);

    // In the invoking user's ~/.cargo/bin, where `cargo install` puts it.
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".cargo/bin")).expect("mkdir");
    std::os::unix::fs::symlink(bin(), home.join(".cargo/bin/ckpt-mount")).expect("symlink");
    let lone = helper_in(&tmp.path().join("lone"));
    let o = run_helper(&lone, &dir, "defaults", &home);
    assert!(o.status.success(), "{}", text(&o));
    assert!(is_mounted(&dir));
    unmount(&dir);
}

#[test]
fn the_fstab_helper_refuses_options_it_cannot_honour() {
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    let sbin = tmp.path().join("sbin");
    let helper = helper_in(&sbin);
    std::os::unix::fs::symlink(bin(), sbin.join("ckpt-mount")).expect("symlink");
    for (opts, says) in [
        (
            "defaults,suid",
            "ckpt-mount: mount option 'suid' is not supported: a ckpt-mount mount is always nosuid,nodev",
        ),
        (
            "noexec,allow_root",
            "ckpt-mount: mount option 'allow_root' is not supported (supported: ro, rw,",
        ),
        (
            "max_blob",
            "ckpt-mount: mount option 'max_blob' is not supported",
        ),
    ] {
        let o = run_helper(&helper, &dir, opts, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{opts}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{opts}: {err}");
        assert!(err.starts_with(says), "{opts}: {err}");
        assert!(!is_mounted(&dir), "{opts}: mounted anyway");
    }
    assert!(!dir.join(".ckpt").exists(), "a refused mount made a store");
}

/// An fstab line's VFS options reach the mount as `mount.fuse3` passes them: `ro,noatime`
/// beside mount(8)'s own and ckpt-mount's gives a read-only mount showing both in mountinfo,
/// with the folder's path as its source.
#[test]
fn the_fstab_helper_passes_vfs_options_to_the_mount() {
    if !require_fuse() {
        return;
    }
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("f"), "one\n").expect("write");
    let sbin = tmp.path().join("sbin");
    let helper = helper_in(&sbin);
    std::os::unix::fs::symlink(bin(), sbin.join("ckpt-mount")).expect("symlink");
    let o = run_helper(
        &helper,
        &dir,
        "defaults,noauto,ro,compress,noatime",
        tmp.path(),
    );
    let _guard = Detach(dir.clone());
    assert!(o.status.success(), "{}", text(&o));
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == dir.to_str())
        .expect("the mount's line");
    let options: Vec<&str> = line
        .split(' ')
        .nth(5)
        .expect("options")
        .split(',')
        .collect();
    assert!(
        options.contains(&"ro") && options.contains(&"noatime"),
        "{line}"
    );
    assert!(
        line.contains(&format!(" - fuse.ckpt-mount {} ", dir.display())),
        "{line}"
    );
    assert!(daemon_cmdline(&o, &dir).contains("--compress"));
    let e = std::fs::write(dir.join("f"), "two\n").expect_err("read-only");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    unmount(&dir);
}

/// Starts `mount DIR --foreground` with `NOTIFY_SOCKET=name`, reads the datagram it sends, and
/// checks that the mount answers by then.
fn ready_notification(sock: &UnixDatagram, name: &str, dir: &Path) {
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut child = Command::new(bin())
        .arg("mount")
        .arg(dir)
        .arg("--foreground")
        .env("NOTIFY_SOCKET", name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn daemon");
    let mut guard = Mounted::attach(dir);
    let mut buf = [0u8; 1024];
    let got = sock.recv(&mut buf);
    let Ok(n) = got else {
        let _ = child.kill();
        panic!("no datagram on {name}: {got:?}");
    };
    let message = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(message.lines().any(|l| l == "READY=1"), "{message:?}");
    // READY means the mount answers.
    assert!(is_mounted(dir));
    assert_eq!(
        std::fs::read_to_string(dir.join(".ckpt/turn")).expect("turn"),
        "1\n"
    );
    guard.unmount();
    assert!(child.wait().expect("daemon").success());
}

#[test]
fn a_foreground_daemon_tells_notify_socket_when_the_mount_is_ready() {
    if !require_fuse() {
        return;
    }
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    let path = tmp.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("bind");
    ready_notification(&sock, &path.display().to_string(), &dir);

    // systemd's own socket is abstract, written with a leading '@'.
    use std::os::linux::net::SocketAddrExt;
    let name = format!("ckpt-notify-test-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
    let sock = UnixDatagram::bind_addr(&addr).expect("bind abstract");
    ready_notification(&sock, &format!("@{name}"), &dir);
}

#[test]
fn the_units_start_step_recovers_a_dead_mount_and_leaves_a_live_one() {
    if !require_fuse() {
        return;
    }
    let unit = std::fs::read_to_string(script("systemd/ckpt-mount@.service")).expect("unit");
    assert!(unit.lines().any(|l| l == "Type=notify"), "{unit}");
    let pre = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStartPre=-"))
        .expect("an ExecStartPre line whose failure is ignored");
    let tmp = scratch();
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    let o = Command::new(bin())
        .arg("mount")
        .arg(&dir)
        .output()
        .expect("mount");
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Detach(dir.clone());
    let start_pre = || {
        Command::new("sh")
            .arg("-c")
            // As systemd reads the line: `%f` the folder, `$$` a dollar sign.
            .arg(
                pre.replace("%f", &dir.display().to_string())
                    .replace("$$", "$"),
            )
            .output()
            .expect("ExecStartPre")
    };
    // A live mount is left alone.
    start_pre();
    assert!(is_mounted(&dir));
    assert_eq!(
        std::fs::read_to_string(dir.join(".ckpt/turn")).expect("turn"),
        "1\n"
    );
    // A daemon killed with -9 leaves a mount that answers nothing.
    let killed = Command::new("kill")
        .args(["-9", &mounted_daemon_pid(&o, &dir).to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    wait_for("the dead mount", || {
        std::fs::read(dir.join(".ckpt/turn"))
            .is_err_and(|e| e.raw_os_error() == Some(libc::ENOTCONN))
    });
    start_pre();
    assert!(!is_mounted(&dir), "the dead mount is still there");
    assert!(std::fs::metadata(&dir).is_ok());
}

/// The README's install for every user, run as written into a scratch root (its `/usr/local`,
/// `/sbin` and `/usr/share` under it; the binary copied from this build, as its second line
/// does, instead of built again by `cargo install`): every file lands, executable where it
/// must be, the completions load in bash, the man page renders; and another user, `ckpt-ci`,
/// runs the installed binary to mount a folder of theirs and unmount it.
#[test]
fn the_readmes_install_for_every_user_works_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("## Installing for every user of a machine")
        .nth(1)
        .expect("the README's install section");
    let block = section.split("```").nth(1).expect("its commands");
    let scratch = scratch();
    let root = scratch.path().join("root");
    for dir in [
        "usr/local/bin",
        "sbin",
        "usr/share/bash-completion/completions",
        "usr/local/share/man/man1",
    ] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    let r = root.display().to_string();
    let installed = format!("{r}/usr/local/bin/ckpt-mount");
    let mut ran = 0;
    for line in block
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or("").trim())
    {
        if line.is_empty() || line.starts_with("cargo install") {
            continue;
        }
        let line = line
            .replace(" /usr/", &format!(" {r}/usr/"))
            .replace(" /sbin/", &format!(" {r}/sbin/"))
            .replace("target/release/ckpt-mount", bin());
        let line = match line.strip_prefix("ckpt-mount ") {
            Some(rest) => format!("{installed} {rest}"),
            None => line,
        };
        let o = Command::new("sh")
            .args(["-ec", &line])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("sh");
        assert!(o.status.success(), "{line}: {}", text(&o));
        ran += 1;
    }
    assert_eq!(ran, 7, "the README's commands changed: {block}");
    use std::os::unix::fs::PermissionsExt;
    for (file, mode) in [
        ("usr/local/bin/ckpt-mount", 0o755),
        ("sbin/mount.fuse.ckpt-mount", 0o755),
    ] {
        let m = std::fs::metadata(root.join(file)).expect(file);
        assert_eq!(m.permissions().mode() & 0o7777, mode, "{file}");
    }
    for script in [
        "usr/local/share/zsh/site-functions/_ckpt-mount",
        "usr/share/fish/vendor_completions.d/ckpt-mount.fish",
    ] {
        let text = std::fs::read_to_string(root.join(script)).expect(script);
        assert!(text.contains("__complete"), "{script} completes no moment");
    }
    let completions = root.join("usr/share/bash-completion/completions/ckpt-mount");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            ". '{}' && complete -p ckpt-mount",
            completions.display()
        ))
        .output()
        .expect("bash");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        root.join("usr/local/share/man/man1/ckpt-mount.1").is_file(),
        "no man page"
    );
    // Another user runs what root installed.
    let Some((uid, gid)) = common::user::tier_runs() else {
        return;
    };
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let area = common::user::UserArea::new(uid, gid);
    let o = area.sh_as(
        common::user::USER,
        &format!("{installed} mount site && echo 2 > site/.ckpt/turn && {installed} unmount site"),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("unmounted"), "{}", text(&o));
}

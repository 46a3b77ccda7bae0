//! A new user's first hour, as seen: mounting what is not a project, a typo in `run`, a daemon
//! killed with `kill -9`, an unmount refused because something is still inside. Each test
//! does what the user did and checks what they are told and what is left behind.

mod common;
use common::output_text as text;
use common::{Mounted, bin, require_fuse};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn ck(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run ckpt-mount")
}

fn is_mounted(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.to_str().expect("utf-8")))
}

#[test]
fn shared_and_system_directories_are_refused_with_a_reason() {
    if !require_fuse() {
        return;
    }
    let tmp_had_store = Path::new("/tmp/.ckpt").exists();
    for dir in ["/tmp", "/usr", "/var/tmp"] {
        let o = ck(&["mount", dir]);
        assert_eq!(o.status.code(), Some(1), "{dir}: {}", text(&o));
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(said.lines().count(), 1, "one line: {said}");
        assert!(said.contains("system or shared directory"), "{said}");
        assert!(said.contains("--force"), "{said}");
        assert!(!is_mounted(Path::new(dir)), "{dir} was mounted");
    }
    let o = ck(&["mount", "/"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        !text(&o).contains("--force"),
        "/ cannot be forced: {}",
        text(&o)
    );
    let o = ck(&["mount", "/proc", "--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("kernel or runtime filesystem"),
        "{}",
        text(&o)
    );
    assert_eq!(
        Path::new("/tmp/.ckpt").exists(),
        tmp_had_store,
        "a store was left in /tmp"
    );
}

#[test]
fn the_home_directory_is_refused_unless_forced() {
    if !require_fuse() {
        return;
    }
    let home = tempfile::Builder::new()
        .prefix("ckpt-home-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let o = Command::new(bin())
        .args(["mount"])
        .arg(home.path())
        .env("HOME", home.path())
        .output()
        .expect("mount");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("home directory"), "{}", text(&o));
    assert!(
        !home.path().join(".ckpt").exists(),
        "a store was left in the home directory"
    );
    let o = Command::new(bin())
        .args(["mount", "--force"])
        .arg(home.path())
        .env("HOME", home.path())
        .output()
        .expect("mount --force");
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Mounted::attach(home.path());
    assert!(is_mounted(home.path()));
}

#[test]
fn run_with_a_missing_command_mounts_nothing() {
    if !require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir_in("/tmp").expect("tempdir");
    let o = Command::new(bin())
        .args(["run", "--", "no-such-command-ckpt"])
        .current_dir(tmp.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(127), "{}", text(&o));
    assert!(text(&o).contains("command not found"), "{}", text(&o));
    assert!(
        !tmp.path().join(".ckpt").exists(),
        "a store was left behind"
    );
    assert!(!is_mounted(tmp.path()));
    // From /tmp itself, as seen: refused before anything else.
    let o = Command::new(bin())
        .args(["run", "--", "true"])
        .current_dir("/tmp")
        .output()
        .expect("run from /tmp");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("/tmp"), "{}", text(&o));
    assert!(!is_mounted(Path::new("/tmp")));
}

#[test]
fn a_folder_inside_or_around_a_mounted_one_is_refused() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::create_dir(d.join("src")).expect("mkdir"));
    let o = ck(&["mount", m.path("src").to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("inside the ckpt-mount folder"),
        "{}",
        text(&o)
    );
    let parent = m.dir.parent().expect("parent");
    let o = ck(&["mount", parent.to_str().expect("utf-8"), "--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("contains the ckpt-mount folder"),
        "{}",
        text(&o)
    );
    assert!(!m.dir.join("src/.ckpt").exists());
    assert!(!parent.join(".ckpt").exists());
}

#[test]
fn a_mount_whose_daemon_was_killed_is_recognised_and_recovered() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a.txt"), "one\n").expect("write"));
    m.turn(2);
    std::fs::write(m.path("a.txt"), "two\n").expect("write");
    let status = m.cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status json");
    let pid = v["pid"].as_i64().expect("pid") as i32;
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // `status` and `turn` say what happened and the one command that recovers.
    for args in [
        &["status"][..],
        &["turn"][..],
        &["rewind", "2", "--dry-run"][..],
    ] {
        let o = m.cli(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let said = text(&o);
        assert!(said.contains("dead mount"), "{args:?}: {said}");
        assert!(
            said.contains(&format!("ckpt-mount mount {}", m.dir.display())),
            "{args:?}: {said}"
        );
    }
    // `mount` completes the detach and mounts again; what was captured is still there.
    let o = ck(&["mount", m.dir.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("dead mount"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(m.path("a.txt")).expect("read"),
        "two\n"
    );
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("a.txt")).expect("read"),
        "one\n"
    );
}

#[test]
fn a_dead_mount_unmounts() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::new();
    let v: serde_json::Value =
        serde_json::from_slice(&m.cli(&["status", "--json"]).stdout).expect("json");
    let pid = v["pid"].as_i64().expect("pid");
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    std::thread::sleep(Duration::from_millis(200));
    m.unmount();
    assert!(!is_mounted(&m.dir));
}

/// A child that holds the mount until dropped.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_busy_unmount_names_the_processes_that_hold_it() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| std::fs::write(d.join("f"), "x").expect("write"));
    let inside = Holder(
        Command::new("sleep")
            .arg("60")
            .current_dir(&m.dir)
            .spawn()
            .expect("sleep"),
    );
    let open = Holder(
        Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3<'{}'; exec sleep 60", m.path("f").display()))
            .current_dir("/")
            .spawn()
            .expect("sh"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let o = ck(&["unmount", m.dir.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains(&format!("{} (sleep, working directory)", inside.0.id())),
        "{said}"
    );
    assert!(
        said.contains(&format!("{} (sleep, open file)", open.0.id())),
        "{said}"
    );
    assert!(is_mounted(&m.dir), "a busy mount must not be torn");
    drop(inside);
    drop(open);
    m.unmount();
}

#[test]
fn run_says_who_keeps_the_folder_mounted_after_its_command() {
    if !require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir_in("/tmp").expect("tempdir");
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    let pid_file = tmp.path().join("straggler.pid");
    // The command starts a straggler that outlives it, standing inside the folder.
    let o = Command::new(bin())
        .args(["run", "--dir"])
        .arg(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "sleep 30 </dev/null >/dev/null 2>&1 & echo $! > \"$1\"",
            "sh",
        ])
        .arg(&pid_file)
        .output()
        .expect("run");
    let _guard = Mounted::attach(&dir);
    let straggler = std::fs::read_to_string(&pid_file).unwrap_or_default();
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("stays mounted"), "{said}");
    assert!(
        said.contains(&format!("{} (sleep", straggler.trim())),
        "{said}"
    );
    assert!(
        said.contains(&format!("ckpt-mount unmount {}", dir.display())),
        "{said}"
    );
    let _ = Command::new("kill").arg(straggler.trim()).status();
}

#[test]
fn run_on_a_terminal_prints_a_banner_with_the_way_back() {
    if !require_fuse() {
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "script (util-linux) is missing"
        );
        return;
    }
    let tmp = tempfile::tempdir_in("/tmp").expect("tempdir");
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    let cmd = format!("{} run --dir {} -- true", bin(), dir.display());
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script");
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "capturing {} from turn 1; undo with: ckpt-mount rewind 1 --dir {}",
            dir.display(),
            dir.display()
        )),
        "{said}"
    );
    assert!(!is_mounted(&dir));
    // Not on a terminal: no banner.
    let o = Command::new(bin())
        .args(["run", "--dir"])
        .arg(&dir)
        .args(["--", "true"])
        .output()
        .expect("run");
    assert!(!text(&o).contains("capturing"), "{}", text(&o));
}

/// A plain `umount(8)` returns before the daemon has exited, and the daemon holds the store's
/// lock until it does: a `mount` at once waits for it (it failed with "the store is in use"
/// 3 times in 200 cycles under load), every time.
#[test]
fn a_mount_right_after_a_plain_umount_waits_for_the_exiting_daemon() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "0\n").expect("write"));
    let dir = m.dir.to_str().expect("utf-8");
    for i in 1..=50 {
        // A capture in each life of the daemon, so that each has a store to let go of.
        std::fs::write(m.path("f"), format!("{i}\n")).expect("write through the mount");
        let o = Command::new("umount").arg(dir).output().expect("umount");
        assert!(o.status.success(), "cycle {i}: umount: {}", text(&o));
        let o = ck(&["mount", dir]);
        assert!(o.status.success(), "cycle {i}: {}", text(&o));
    }
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("read"), "50\n");
    m.turn(2);
    std::fs::write(m.path("f"), "changed\n").expect("write");
    m.rewind(2);
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("read"), "50\n");
}

/// A daemon that is not exiting keeps the lock: here one still serving a mount detached with
/// `umount -l` while a process works inside. A new mount of the folder waits for it (10 s),
/// then is refused in one line naming the daemon's pid; once the old mount is let go, the
/// folder mounts again.
#[test]
fn a_mount_while_another_daemon_holds_the_store_names_its_pid() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "x\n").expect("write"));
    let v: serde_json::Value =
        serde_json::from_slice(&m.cli(&["status", "--json"]).stdout).expect("status json");
    let pid = v["pid"].as_i64().expect("pid");
    let inside = Holder(
        Command::new("sleep")
            .arg("120")
            .current_dir(&m.dir)
            .spawn()
            .expect("sleep"),
    );
    std::thread::sleep(Duration::from_millis(200));
    let dir = m.dir.to_str().expect("utf-8");
    let o = Command::new("umount")
        .args(["-l", dir])
        .output()
        .expect("umount -l");
    assert!(o.status.success(), "{}", text(&o));
    assert!(!is_mounted(&m.dir));
    let started = std::time::Instant::now();
    let o = ck(&["mount", dir]);
    let waited = started.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("the store is in use by another ckpt-mount process")
            && said.contains(&format!("pid {pid} ("))
            && said.contains("still holds its lock after 10 s"),
        "{said}"
    );
    assert!(waited >= Duration::from_secs(9), "refused after {waited:?}");
    assert!(!is_mounted(&m.dir));
    // The detached mount ends with the last process inside it, and its daemon with it.
    drop(inside);
    let o = ck(&["mount", dir]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("read"), "x\n");
}

/// `unshare -m` (a sandbox, a service with `PrivateMounts=`) copies every mount into a new
/// mount namespace; with private propagation an unmount here does not reach the copy, so the
/// kernel keeps the filesystem and its daemon serves on, the store locked. `unmount` waits a
/// moment for the daemon, then says so in one line naming the daemon and a process in the
/// other namespace, and fails; once that process ends, the daemon exits and the folder mounts
/// again.
#[test]
fn an_unmount_that_another_mount_namespace_outlives_names_both_processes() {
    if !require_fuse() || !common::require_program("unshare") {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "x\n").expect("write"));
    let v: serde_json::Value =
        serde_json::from_slice(&m.cli(&["status", "--json"]).stdout).expect("status json");
    let daemon = v["pid"].as_i64().expect("pid");
    let copy = Holder(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sleep", "60"])
            .current_dir("/")
            .spawn()
            .expect("unshare"),
    );
    let own_ns = std::fs::read_link("/proc/self/ns/mnt").expect("own namespace");
    let its_ns = format!("/proc/{}/ns/mnt", copy.0.id());
    for _ in 0..500 {
        if std::fs::read_link(&its_ns).is_ok_and(|ns| ns != own_ns) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let dir = m.dir.to_str().expect("utf-8");
    let started = std::time::Instant::now();
    let o = ck(&["unmount", dir]);
    let waited = started.elapsed();
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(o.stdout.is_empty(), "no \"unmounted\": {}", text(&o));
    assert!(
        said.contains("another mount namespace still has it mounted")
            && said.contains(&format!("process {} is in it", copy.0.id()))
            && said.contains(&format!("its daemon (pid {daemon})"))
            && said.contains(&format!("`kill {daemon}`")),
        "{said}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    assert!(!is_mounted(&m.dir), "unmounted in this namespace");
    assert!(
        Path::new(&format!("/proc/{daemon}")).exists(),
        "the daemon serves the copy"
    );
    // The namespace ends with its last process, the copy with it, and the daemon then.
    drop(copy);
    for _ in 0..500 {
        if !Path::new(&format!("/proc/{daemon}")).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = ck(&["mount", dir]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(m.path("f")).expect("read"), "x\n");
}

/// The bit of `SIGINT` in a signal mask of `/proc/PID/status`.
const SIGINT_BIT: u64 = 1 << 1;

/// The mask `field` (`SigBlk`, `ShdPnd`) of process `pid`, or 0 once it is gone.
fn signal_mask(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

/// Sends `SIGINT` to `pid` once it blocks the signal (the CLI does from just before it asks
/// the daemon to change the folder), and waits until the signal has been taken.
fn ctrl_c(pid: u32) {
    for _ in 0..10_000 {
        if signal_mask(pid, "SigBlk") & SIGINT_BIT != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        signal_mask(pid, "SigBlk") & SIGINT_BIT != 0,
        "the CLI never blocked SIGINT"
    );
    let o = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .output()
        .expect("kill");
    assert!(o.status.success(), "{}", text(&o));
    for _ in 0..10_000 {
        if signal_mask(pid, "ShdPnd") & SIGINT_BIT == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Ctrl-C while the daemon rewinds thousands of files: the CLI says in one line that the
/// rewind goes on in the daemon and that `undo` takes it back, keeps waiting and prints the
/// report (exit 0); the folder is exact, and `undo` takes it back. A second Ctrl-C (here
/// during that undo) stops the waiting with exit 130, saying the undo goes on: it does, and
/// the folder ends exact again.
#[test]
fn ctrl_c_during_a_rewind_says_it_goes_on_and_undo_takes_it_back() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::create_dir(d.join("a")).expect("mkdir");
        for i in 0..6000 {
            std::fs::write(d.join(format!("a/f{i:04}")), format!("{i}\n")).expect("write");
        }
    });
    m.turn(2);
    let at2 = common::tree(&m.dir, false);
    m.sh("rm -rf a && echo new > b");
    let before = common::tree(&m.dir, false);
    let dir = m.dir.to_str().expect("utf-8");
    let spawn = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .args(["--dir", dir])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("ckpt-mount")
    };
    let rewind = spawn(&["rewind", "2", "-y"]);
    ctrl_c(rewind.id());
    let o = rewind.wait_with_output().expect("rewind");
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("the rewind goes on in the daemon")
            && said.contains(&format!("`ckpt-mount undo --dir {dir}` takes it back")),
        "{said}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("rewound to the start of turn 2: "),
        "{}",
        text(&o)
    );
    common::assert_same_tree(&at2, &common::tree(&m.dir, false));
    // Twice during the undo: it stops waiting, and the undo goes on all the same.
    let undo = spawn(&["undo", "-y"]);
    ctrl_c(undo.id());
    ctrl_c(undo.id());
    let o = undo.wait_with_output().expect("undo");
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        said.contains("the undo goes on in the daemon")
            && said.contains("stopped waiting; the undo goes on in the daemon")
            && said.contains(&format!("`ckpt-mount redo --dir {dir}` takes it back")),
        "{said}"
    );
    // Done once the operation log says so (the folder is not read while it changes).
    let undone = || {
        let log = m.cli(&["op", "log", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap_or_default();
        rows[0]["kind"] == "undo" && rows[0]["state"] == "done"
    };
    for _ in 0..300 {
        if undone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(undone(), "the undo went on to its end");
    common::assert_same_tree(&before, &common::tree(&m.dir, false));
}

/// `run` started by a parent that ignores `SIGCHLD` (an ignored signal stays ignored through
/// `execve`): it still returns when its command ends, with the command's code, and unmounts.
/// Ignored, the kernel would reap children by itself and `run`'s wait for any child would
/// block until every one was gone, the daemon it mounted included.
#[test]
fn run_returns_when_its_parent_ignores_sigchld() {
    if !require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir_in("/tmp").expect("tempdir");
    let dir = tmp.path().join("site");
    std::fs::create_dir(&dir).expect("mkdir");
    // bash passes an ignored SIGCHLD on to what it execs (dash does not).
    let mut child = Command::new("bash")
        .args([
            "-c",
            "trap '' CHLD; exec \"$0\" run -- sh -c 'echo made > made.txt; exit 3'",
        ])
        .arg(bin())
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = Command::new("umount").arg("-l").arg(&dir).status();
            panic!("run did not return within 30 s of its command's end");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "the command's code");
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).expect("made.txt"),
        "made\n"
    );
    assert!(!is_mounted(&dir), "run unmounted the folder it mounted");
}

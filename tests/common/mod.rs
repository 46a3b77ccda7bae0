//! Shared harness for tests that mount for real: a temp folder mounted by the real binary,
//! unmounted by a drop guard even when the test panics, plus tree snapshots to compare.
#![allow(dead_code)]

pub mod agents;
pub mod paths;
pub mod reference;
pub mod rng;
pub mod user;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: the build's, or a copy a normal user can run (`CKPT_TEST_BIN`, set
/// by `user::rerun_as_user`).
pub fn bin() -> &'static str {
    static BIN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        std::env::var("CKPT_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_ckpt-mount").to_string())
    });
    BIN.as_str()
}

/// A number from the environment: decimal, or hexadecimal after `0x`; `None` when unset.
/// A value that is not a number is a mistake of whoever set it, and fails the test.
pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let t = v.trim();
    let parsed = match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")))
}

/// The pid of the daemon serving the mount at `dir`, from `status --json`.
pub fn daemon_pid(dir: &Path) -> u32 {
    let o = Command::new(bin())
        .args(["status", "--json", "--dir"])
        .arg(dir)
        .output()
        .expect("run status");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("status json");
    let pid = v["pid"].as_u64().expect("daemon pid");
    u32::try_from(pid).expect("a pid fits in u32")
}

/// Whether FUSE tests can run; under `CI=true` a missing `/dev/fuse` is a failure.
pub fn require_fuse() -> bool {
    if Path::new("/dev/fuse").exists() {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("/dev/fuse is missing: FUSE tests cannot run, and under CI=true that is a failure");
    }
    eprintln!("skipping: /dev/fuse is missing (set CI=true to make this a failure)");
    false
}

/// Whether the long tests run: only with `CKPT_LONG` set (to anything but `0`), as `.ci/run`
/// does. Otherwise the test says so in one line on stderr, written past the test harness's
/// capture so that it shows in a passing run: a skip is never silent.
pub fn long_tests_run(name: &str) -> bool {
    if std::env::var("CKPT_LONG").is_ok_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "skipped (long): set CKPT_LONG=1 to run {name}"
    );
    false
}

/// A mounted temp folder. Dropping it unmounts (lazily if busy) and removes the folder.
pub struct Mounted {
    /// The mounted folder.
    pub dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
    mounted: bool,
}

impl Mounted {
    /// Mounts an empty folder.
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// Prepares the folder with `setup` (before the mount), then mounts it.
    pub fn with(setup: impl FnOnce(&Path)) -> Self {
        Self::with_args(setup, &[])
    }

    /// As `with`, passing extra `mount` arguments.
    pub fn with_args(setup: impl FnOnce(&Path), args: &[&str]) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-test-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let dir = tmp.path().join("project");
        std::fs::create_dir(&dir).expect("mkdir project");
        setup(&dir);
        let out = Command::new(bin())
            .arg("mount")
            .arg(&dir)
            .args(args)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            dir,
            tmp: Some(tmp),
            mounted: true,
        }
    }

    /// Takes over a folder the caller has mounted itself (the guard unmounts it, and leaves
    /// the folder).
    pub fn attach(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            tmp: None,
            mounted: true,
        }
    }

    /// Mounts an existing folder the caller owns (the guard unmounts it, and leaves it).
    pub fn adopt(dir: &Path) -> Self {
        let mut m = Self {
            dir: dir.to_path_buf(),
            tmp: None,
            mounted: false,
        };
        m.remount();
        m
    }

    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Runs a shell script inside the mount; panics with its stderr on failure.
    pub fn sh(&self, script: &str) -> String {
        let out = self.sh_output(script);
        assert!(
            out.status.success(),
            "script failed: {script}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a shell script inside the mount and returns its output whatever the status.
    pub fn sh_output(&self, script: &str) -> Output {
        Command::new("sh")
            .arg("-ec")
            .arg(script)
            .current_dir(&self.dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env(
                "HOME",
                self.tmp.as_ref().map_or(Path::new("/tmp"), |t| t.path()),
            )
            .output()
            .expect("run sh")
    }

    /// Begins turn `n` through the control file.
    pub fn turn(&self, n: u64) {
        std::fs::write(self.path(".ckpt/turn"), format!("{n}\n")).expect("write .ckpt/turn");
    }

    /// Runs the CLI with `--dir` pointing at this folder appended.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .expect("run cli")
    }

    /// `ckpt-mount rewind N`; panics unless it succeeds.
    pub fn rewind(&self, n: u64) -> String {
        let out = self.cli(&["rewind", &n.to_string()]);
        assert!(
            out.status.success(),
            "rewind {n} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Unmounts now (the guard then only removes the folder).
    pub fn unmount(&mut self) {
        if self.mounted {
            let out = Command::new(bin())
                .arg("unmount")
                .arg(&self.dir)
                .output()
                .expect("run unmount");
            assert!(
                out.status.success(),
                "unmount failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            self.mounted = false;
        }
    }

    /// Mounts again after `unmount`.
    pub fn remount(&mut self) {
        self.remount_with(&[]);
    }

    /// Mounts again after `unmount`, passing extra `mount` arguments.
    pub fn remount_with(&mut self, args: &[&str]) {
        assert!(!self.mounted);
        let out = Command::new(bin())
            .arg("mount")
            .arg(&self.dir)
            .args(args)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.mounted = true;
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted {
            let ok = Command::new(bin())
                .arg("unmount")
                .arg(&self.dir)
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                // Busy or wedged: detach so the test machine is never left with a dead mount.
                let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            }
        }
        if let Some(t) = self.tmp.take() {
            let _ = t.close();
        }
    }
}

/// What one path is, for exact comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Regular file: mode bits, bytes, and the index of its hard-link group (0 if nlink == 1).
    File {
        mode: u32,
        data: Vec<u8>,
        link_group: usize,
    },
    /// Directory with mode bits.
    Dir { mode: u32 },
    /// Symlink target.
    Symlink { target: PathBuf },
    /// FIFO with mode bits.
    Fifo { mode: u32 },
}

/// Every path below `root` (not `.ckpt`, and not `.git` unless `with_git`) with what it is.
/// Hard links are numbered in walk order so that two trees compare by sharing, not inode.
pub fn tree(root: &Path, with_git: bool) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    let mut groups: BTreeMap<u64, usize> = BTreeMap::new();
    let mut stack = vec![String::new()];
    let mut entries: Vec<(String, std::fs::Metadata)> = Vec::new();
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            if rel.is_empty() && (name == ".ckpt" || (name == ".git" && !with_git)) {
                continue;
            }
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let md = std::fs::symlink_metadata(root.join(&path)).expect("lstat");
            if md.is_dir() {
                stack.push(path.clone());
            }
            entries.push((path, md));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, md) in entries {
        let mode = md.permissions().mode() & 0o7777;
        let ft = md.file_type();
        let node = if ft.is_dir() {
            Node::Dir { mode }
        } else if ft.is_symlink() {
            Node::Symlink {
                target: std::fs::read_link(root.join(&path)).expect("readlink"),
            }
        } else if ft.is_file() {
            let link_group = if md.nlink() > 1 {
                let n = groups.len() + 1;
                *groups.entry(md.ino()).or_insert(n)
            } else {
                0
            };
            Node::File {
                mode,
                data: std::fs::read(root.join(&path)).expect("read"),
                link_group,
            }
        } else {
            Node::Fifo { mode }
        };
        out.insert(path, node);
    }
    out
}

/// Asserts two trees are equal, naming the first paths that differ.
pub fn assert_same_tree(expected: &BTreeMap<String, Node>, actual: &BTreeMap<String, Node>) {
    if expected == actual {
        return;
    }
    let mut diffs = Vec::new();
    for k in expected.keys().chain(actual.keys()) {
        if expected.get(k) != actual.get(k) && !diffs.contains(k) {
            diffs.push(k.clone());
        }
    }
    let show = |m: &BTreeMap<String, Node>, k: &str| match m.get(k) {
        None => "absent".to_string(),
        Some(Node::File {
            mode,
            data,
            link_group,
        }) => format!(
            "file {mode:o} {} bytes {:?} link_group {link_group}",
            data.len(),
            String::from_utf8_lossy(&data[..data.len().min(60)])
        ),
        Some(n) => format!("{n:?}"),
    };
    let lines: Vec<String> = diffs
        .iter()
        .take(12)
        .map(|k| {
            format!(
                "  {k}: expected {} / actual {}",
                show(expected, k),
                show(actual, k)
            )
        })
        .collect();
    panic!(
        "trees differ at {} paths:\n{}",
        diffs.len(),
        lines.join("\n")
    );
}

/// Every file of the store `.ckpt/` below `dir` with its bytes (the lock's and the log's
/// too), to prove that a refused command changed nothing there.
pub fn store_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let root = dir.join(".ckpt");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.expect("entry").path();
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            let rel = p
                .strip_prefix(&root)
                .expect("below the store")
                .to_string_lossy()
                .into_owned();
            if md.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).expect("read store file"));
            }
        }
    }
    out
}

/// The folder under the mount of `m` (its store included, which the mount hides), reached
/// through the daemon's own root descriptor (the test runs as root, so `/proc/PID/fd` of the
/// non-dumpable daemon is open to it).
pub fn raw_folder(m: &Mounted) -> PathBuf {
    let o = m.cli(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("status --json ({e}): {}", output_text(&o)));
    let pid = v["pid"].as_u64().expect("daemon pid");
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("daemon fds") {
        let p = e.expect("fd").path();
        if std::fs::read_link(&p).ok().as_deref() == Some(m.dir.as_path())
            && p.join(".ckpt/VERSION").is_file()
        {
            return p;
        }
    }
    panic!("no root descriptor of {} in the daemon", m.dir.display());
}

/// A tmpfs mounted on a folder (a test's project folder, before ckpt-mount mounts over it),
/// unmounted on drop, which then also removes the folder and its parent if they are empty:
/// the project's temporary directory could not be removed while the tmpfs was on it.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs with these `mount -o` options (`size=…`, `nr_inodes=…`) and mode 0755.
    pub fn mount(dir: &Path, options: &str) -> Self {
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("{options},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .expect("run mount")
            .success();
        assert!(ok, "mounting a tmpfs needs root");
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// `$ ckpt-mount ARGS`, its exit code and what it printed, for a snapshot of the whole
/// output. Each `(from, to)` of `redact` is replaced everywhere (the arguments included), so
/// that temp folders and the like read the same on every run: `(dir, "[DIR]")`. Longer
/// `from`s are replaced first, so a folder inside another is not half replaced.
pub fn transcript(args: &[&str], o: &Output, redact: &[(&str, &str)]) -> String {
    let mut redact: Vec<(&str, &str)> = redact.to_vec();
    redact.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    let clean = |s: &str| {
        redact
            .iter()
            .fold(s.to_string(), |s, (from, to)| s.replace(from, to))
    };
    let mut t = format!(
        "$ ckpt-mount{}\nexit {}\n",
        clean(&args.iter().map(|a| format!(" {a}")).collect::<String>()),
        o.status
            .code()
            .map_or_else(|| "by a signal".to_string(), |c| c.to_string())
    );
    for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if !bytes.is_empty() {
            let text = clean(&String::from_utf8_lossy(bytes));
            t.push_str(&format!("{name}:\n{}\n", text.trim_end_matches('\n')));
        }
    }
    // A blank line after each, for transcripts of several commands.
    t.push('\n');
    t
}

/// Whether `program` runs (`program --version`); under `CI=true` a missing one fails the test,
/// because `.ci/run` installs it.
pub fn require_program(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{program} is not installed: under CI=true this test must run (.ci/run installs it)"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {program} is not installed (under CI=true this fails)"
    );
    false
}

/// A command's stdout and stderr, as one text.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The path of a script in `mount-scripts/`.
pub fn mount_script(rel: &str) -> String {
    format!("{}/mount-scripts/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `ckpt-mount ARGS` on a pseudo-terminal (its stdin, stdout and stderr), answering
/// `answer` when it asks `Proceed? [y/N]`; returns what the terminal showed and the exit code.
/// Driven by python3's `pty` module (CI installs python3).
pub fn on_a_terminal(answer: &str, args: &[&str], dir: &Path) -> (String, Option<i32>) {
    const DRIVER: &str = r#"
import os, pty, select, sys, time
answer, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out, asked, deadline = b"", False, time.time() + 60
while time.time() < deadline:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    if not asked and b"Proceed? [y/N] " in out:
        os.write(fd, answer.encode() + b"\n")
        asked = True
if time.time() >= deadline and os.waitpid(pid, os.WNOHANG)[0] == 0:
    # Still running at the deadline (waiting for input it will never get): ended, and said.
    # (Before it, the loop ended on the terminal's end: the command is exiting, waited for.)
    os.kill(pid, 9)
    out += b"\n[the command was still running after 60 s and was killed]\n"
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r\n", "\n"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(answer)
        .arg(bin())
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("python3 (CI installs it) drives the pseudo-terminal");
    assert!(o.stderr.is_empty(), "{}", output_text(&o));
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.code(),
    )
}

/// Two tests of one property, `$root` on root's mount and `$users` on a normal user's own
/// mount (this test binary run again as the user `ckpt-ci`), each running `$body`: what holds
/// on root's mount is tested where users are too.
#[macro_export]
macro_rules! on_both_mounts {
    ($(#[$doc:meta])* $root:ident, $users:ident, $body:path) => {
        $(#[$doc])*
        #[test]
        fn $root() {
            if common::require_fuse() {
                $body();
            }
        }

        /// The same on a normal user's own mount.
        #[test]
        fn $users() {
            if common::user::in_user_run() {
                $body();
            } else if common::require_fuse() {
                common::user::rerun_as_user(stringify!($users));
            }
        }
    };
}

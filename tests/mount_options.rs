//! What `/proc/mounts` shows of a mount and what `mount -o` does, as `mount.fuse3` users expect:
//! the folder's own path as the source (escaped as the kernel escapes it, a comma and a space
//! in the name included), the type `fuse.ckpt-mount` by which every command finds its mounts,
//! and the usual VFS options (`ro`, `noatime`, `noexec` …) honoured by the kernel. Each on
//! root's mount and on a normal user's own (through `fusermount3`).

mod common;
use common::output_text as text;
use common::{Mounted, bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `dir` as `/proc/self/mountinfo` writes a path: space, tab, newline and backslash as `\ooo`.
fn escaped(dir: &Path) -> String {
    let mut out = String::new();
    for c in dir.to_str().expect("utf-8").chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The mountinfo line of the mount at `dir`: its per-mount options, type, source and the
/// filesystem's options.
struct Line {
    mount_options: Vec<String>,
    fstype: String,
    source: String,
    super_options: Vec<String>,
}

fn mountinfo(dir: &Path) -> Option<Line> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let want = escaped(dir);
    let line = text
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(want.as_str()))?;
    let fields: Vec<&str> = line.split(' ').collect();
    let sep = fields.iter().position(|f| *f == "-").expect("separator");
    let list = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
    Some(Line {
        mount_options: list(fields[5]),
        fstype: fields[sep + 1].to_string(),
        source: fields[sep + 2].to_string(),
        super_options: list(fields[sep + 3]),
    })
}

/// A scratch area holding one folder named `name`.
fn folder(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-opts-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    (tmp, dir)
}

/// `ckpt-mount COMMAND --dir DIR ARGS…` (`--dir` before the args, which may end in `-- PATH`).
fn ck(args: &[&str], dir: &Path) -> Output {
    let (command, rest) = args.split_first().expect("a command");
    Command::new(bin())
        .arg(command)
        .arg("--dir")
        .arg(dir)
        .args(rest)
        .output()
        .expect("run ckpt-mount")
}

fn mount(dir: &Path, options: &[&str]) -> Output {
    Command::new(bin())
        .arg("mount")
        .arg(dir)
        .args(options)
        .output()
        .expect("run mount")
}

/// A folder whose name holds a space, a comma (which `fusermount3`'s option list must carry
/// escaped) and a backslash mounts; mountinfo shows its path as the source, escaped as the
/// kernel escapes it, and the type `fuse.ckpt-mount`; findmnt reads the source back as the
/// path; and every command still finds the mount by its type: `status`, `turn`, `log`,
/// `rewind` and `unmount`.
fn the_source_is_the_folder() {
    let (_tmp, dir) = folder("my site, v2\\b");
    std::fs::write(dir.join("f"), "one\n").expect("write");
    let o = mount(&dir, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mut guard = Mounted::attach(&dir);
    let line = mountinfo(&dir).expect("the mount's line");
    assert_eq!(line.fstype, "fuse.ckpt-mount");
    assert_eq!(line.source, escaped(&dir));
    let o = Command::new("findmnt")
        .args(["-n", "-o", "SOURCE,FSTYPE", "--mountpoint"])
        .arg(&dir)
        .output()
        .expect("findmnt");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim_end(),
        format!("{} fuse.ckpt-mount", dir.display())
    );
    let o = ck(&["status"], &dir);
    assert!(text(&o).contains("mounted:  yes"), "{}", text(&o));
    let o = ck(&["turn", "2"], &dir);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(dir.join("f"), "two\n").expect("write");
    assert!(ck(&["log"], &dir).status.success());
    let o = ck(&["rewind", "2", "--yes"], &dir);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).expect("read"),
        "one\n"
    );
    guard.unmount();
    assert!(mountinfo(&dir).is_none(), "still mounted");
}

on_both_mounts!(
    the_mounts_source_is_the_folder_and_its_type_finds_it,
    the_mounts_source_is_the_folder_and_its_type_finds_it_on_a_users_mount,
    the_source_is_the_folder
);

/// `-o ro,noatime` on a folder with history: mountinfo shows both; every write through the
/// mount fails with `EROFS` (a file, a new one, a directory, a removal, the control file
/// `.ckpt/turn`); the history reads as ever (`.ckpt/turn`, `log`, `cat`, `diff`, a rewind's
/// dry run, `op show`, `op restore --dry-run`); a rewind, an undo and an `op restore`, which
/// would change the folder beside the mount, are refused, and change nothing. Mounted again without `ro`, it is read-write.
fn read_only() {
    let (_tmp, dir) = folder("site");
    std::fs::write(dir.join("f"), "one\n").expect("write");
    let o = mount(&dir, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mut guard = Mounted::attach(&dir);
    guard.turn(2);
    std::fs::write(dir.join("f"), "two\n").expect("write");
    guard.unmount();

    let o = mount(&dir, &["-o", "ro,noatime"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut guard = Mounted::attach(&dir);
    let line = mountinfo(&dir).expect("the mount's line");
    for word in ["ro", "noatime", "nosuid", "nodev"] {
        assert!(
            line.mount_options.iter().any(|o| o == word),
            "{word} missing: {:?}",
            line.mount_options
        );
    }
    assert!(line.super_options.iter().any(|o| o == "ro"));
    let erofs = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{what}: {e}");
    };
    erofs(std::fs::write(dir.join("f"), "three\n"), "write f");
    erofs(std::fs::write(dir.join("new"), "x"), "create new");
    erofs(std::fs::create_dir(dir.join("d")), "mkdir d");
    erofs(std::fs::remove_file(dir.join("f")), "rm f");
    erofs(
        std::fs::write(dir.join(".ckpt/turn"), "3\n"),
        "begin a turn",
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg("echo three > f")
        .current_dir(&dir)
        .output()
        .expect("sh");
    assert!(!o.status.success());
    assert!(text(&o).contains("Read-only file system"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join(".ckpt/turn")).expect("turn"),
        "2\n"
    );
    let o = ck(&["cat", "2", "--", "f"], &dir);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "one\n", "{}", text(&o));
    assert!(text(&ck(&["diff", "2"], &dir)).contains("+two"));
    assert!(ck(&["log"], &dir).status.success());
    let o = ck(&["rewind", "2", "--dry-run"], &dir);
    assert!(text(&o).contains("restore  f"), "{}", text(&o));
    // `op show` reads, `op restore --dry-run` previews (#1: the folder as mounted).
    let op = |args: &[&str]| {
        Command::new(bin())
            .arg("op")
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .output()
            .expect("run ckpt-mount op")
    };
    let o = op(&["show", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = op(&["restore", "1", "--dry-run"]);
    assert!(text(&o).contains("restore  f"), "{}", text(&o));
    for args in [
        &["rewind", "2", "--yes"][..],
        &["undo", "--yes"][..],
        &["op", "restore", "1", "--yes"][..],
    ] {
        let o = match args.split_first() {
            Some((&"op", rest)) => op(rest),
            _ => ck(args, &dir),
        };
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("mounted read-only (-o ro)"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).expect("read"),
        "two\n"
    );
    guard.unmount();

    let o = mount(&dir, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mut guard = Mounted::attach(&dir);
    assert!(mountinfo(&dir).expect("line").mount_options[0] == "rw");
    std::fs::write(dir.join("f"), "three\n").expect("a read-write mount again");
    guard.unmount();
}

on_both_mounts!(
    a_read_only_mount_refuses_writes_and_reads_history,
    a_read_only_mount_refuses_writes_and_reads_history_on_a_users_mount,
    read_only
);

/// `-o noexec,sync,dirsync` (given as two lists, the later word of a pair winning): each shows
/// in mountinfo and `noexec` stops a script in the folder from running; `nodiratime` shows
/// too, or, where `fusermount3` cannot pass it for a user, the mount is refused saying so and
/// nothing is mounted.
fn other_flags() {
    let (_tmp, dir) = folder("site");
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(
        dir.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let o = mount(&dir, &["-o", "exec,sync", "--options=noexec,dirsync"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut guard = Mounted::attach(&dir);
    let line = mountinfo(&dir).expect("the mount's line");
    assert!(
        line.mount_options.iter().any(|o| o == "noexec"),
        "{:?}",
        line.mount_options
    );
    for word in ["sync", "dirsync"] {
        assert!(
            line.super_options.iter().any(|o| o == word),
            "{word}: {:?}",
            line.super_options
        );
    }
    let e = Command::new(dir.join("run.sh"))
        .output()
        .expect_err("noexec");
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    guard.unmount();

    let o = mount(&dir, &["-o", "nodiratime"]);
    if o.status.success() {
        let mut guard = Mounted::attach(&dir);
        let line = mountinfo(&dir).expect("the mount's line");
        assert!(line.mount_options.iter().any(|o| o == "nodiratime"));
        guard.unmount();
    } else {
        assert!(
            common::user::in_user_run(),
            "root mounts with any flag: {}",
            text(&o)
        );
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            said.contains("unknown option 'nodiratime'")
                && said.contains("cannot set that mount option on a user's mount"),
            "{said}"
        );
        assert!(mountinfo(&dir).is_none());
    }
}

on_both_mounts!(
    mount_flags_reach_the_kernel,
    mount_flags_reach_the_kernel_on_a_users_mount,
    other_flags
);

/// `-o` words a ckpt-mount mount does not take are bad usage (exit 2), in one line naming the
/// word, before anything is mounted or a store made.
#[test]
fn unsupported_mount_options_are_refused_before_anything_happens() {
    let (_tmp, dir) = folder("site");
    for (opts, says) in [
        (
            "ro,suid",
            "mount option 'suid' is not supported: a ckpt-mount mount is always nosuid,nodev",
        ),
        ("dev", "mount option 'dev' is not supported"),
        (
            "fsname=x",
            "mount option 'fsname=x' is not supported (supported: ro, rw,",
        ),
    ] {
        let o = mount(&dir, &["-o", opts]);
        assert_eq!(o.status.code(), Some(2), "{opts}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{opts}: {err}");
        assert!(err.contains(says), "{opts}: {err}");
        assert!(mountinfo(&dir).is_none(), "{opts}: mounted");
    }
    assert!(!dir.join(".ckpt").exists(), "a refused mount made a store");
}

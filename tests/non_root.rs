//! The non-root tier: ckpt-mount used as a normal user, as most people run their agents. The
//! mount goes through `fusermount3`, file I/O is served by the daemon (kernel passthrough
//! needs `CAP_SYS_ADMIN`), and mount, a shell turn, diff, preview, rewind, the recovery of a
//! killed daemon, `run` and unmount all work; the store stays the user's, private.
//!
//! Needs the account `ckpt-ci` with read-write access to `/dev/fuse` (`.ci/run` creates it and
//! grants access with an ACL, as a distribution's udev rule would with mode 0666). Without it
//! the tier says so and skips; under `CI=true` that is a failure.

mod common;
use common::user::{USER, UserArea, tier_runs};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

fn mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|l| l.split(' ').nth(4) == dir.to_str())
}

#[test]
fn a_normal_user_mounts_marks_a_turn_previews_rewinds_and_unmounts() {
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    area.sh("printf 'one\\n' > site/a.txt; printf 'keep\\n' > site/b.txt; chmod 640 site/b.txt");
    let out = area.sh("$ck mount site");
    assert!(out.contains("mounted"), "{out}");
    assert!(mounted(&area.site));
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(
        info.lines()
            .any(|l| l.contains(area.site.to_str().expect("utf-8"))
                && l.contains(&format!("user_id={uid}"))),
        "a user mount: {info}"
    );
    // An agent's turn through the shell.
    area.sh(
        "cd site && echo 2 > .ckpt/turn && sed -i s/one/two/ a.txt && rm b.txt && echo new > c.txt && mkdir d",
    );
    // The session's soft limit on descriptors (1,024 under PAM) is raised to the hard one: a
    // rewind of a big tree needs more.
    let pid = area.sh("$ck status --json --dir site | sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", pid.trim())).expect("limits");
    let nofile: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files")
        .split_whitespace()
        .collect();
    assert_eq!(nofile[3], nofile[4], "soft and hard limits: {nofile:?}");
    let status = area.sh("$ck status --dir site");
    assert!(
        status.contains("file I/O: served by the daemon (kernel passthrough needs CAP_SYS_ADMIN"),
        "{status}"
    );
    assert!(status.contains(&format!("uid {uid}")), "{status}");
    let diff = area.sh("$ck diff 2 --stat --dir site");
    for p in ["a.txt", "b.txt", "c.txt"] {
        assert!(diff.contains(p), "{p} in {diff}");
    }
    let preview = area.sh("$ck rewind 2 --dry-run --dir site");
    assert!(preview.contains("c.txt"), "{preview}");
    area.sh("$ck rewind 2 --dir site");
    // Read through the mount as the user: without allow_other the kernel lets no one else in,
    // root included.
    let seen = area.sh("cd site && cat a.txt && stat -c '%a %u %g' b.txt && ls");
    assert_eq!(seen, format!("one\n640 {uid} {gid}\na.txt\nb.txt\n"));
    area.sh("$ck unmount site");
    assert!(!mounted(&area.site));
    // The store is the user's and private.
    let store = area.site.join(".ckpt");
    let mut checked = 0;
    for entry in walk(&store) {
        let m = std::fs::symlink_metadata(&entry).expect("stat");
        assert_eq!(m.uid(), uid, "{} owned by the user", entry.display());
        let mode = m.mode() & 0o777;
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{} is {mode:o}", entry.display());
        checked += 1;
    }
    assert!(checked > 4, "walked the store: {checked} entries");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_normal_users_killed_daemon_is_recovered_and_run_cleans_up() {
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    area.sh("echo one > site/a.txt && $ck mount site && echo 2 > site/.ckpt/turn && echo two > site/a.txt");
    let pid = area.sh("$ck status --json --dir site | sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'");
    area.sh(&format!("kill -9 {}", pid.trim()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = area.sh_as(USER, "$ck status --dir site");
    assert_eq!(o.status.code(), Some(1));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("dead mount"), "{said}");
    // `mount` detaches the dead mount through fusermount3 and mounts again.
    let out = area.sh("$ck mount site 2>&1");
    assert!(out.contains("dead mount"), "{out}");
    assert_eq!(area.sh("cat site/a.txt"), "two\n");
    area.sh("$ck rewind 2 --dir site && $ck unmount site");
    assert_eq!(
        std::fs::read_to_string(area.site.join("a.txt")).expect("a"),
        "one\n"
    );
    // `run` mounts, runs the command inside, and unmounts as the user.
    area.sh("$ck run --dir site -- sh -c 'echo three > a.txt'");
    assert!(!mounted(&area.site), "run left the mount behind");
    assert_eq!(
        std::fs::read_to_string(area.site.join("a.txt")).expect("a"),
        "three\n"
    );
}

/// A busy unmount as a user goes through `fusermount3 -u`, which says "Device or resource busy"
/// and exits 1: `unmount` names the processes inside, as it does for root, and the mount stays.
#[test]
fn a_normal_users_busy_unmount_names_the_shell_sitting_in_the_folder() {
    use std::io::{BufRead, BufReader};
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    area.sh("echo one > site/a.txt && $ck mount site");
    // The user's shell, its working directory in the mounted folder, waiting for a line.
    let mut shell = std::process::Command::new("runuser")
        .args([
            "-u",
            USER,
            "--",
            "sh",
            "-c",
            "cd site && echo $$ && read line",
        ])
        .current_dir(area.root.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the user's shell");
    let mut first = String::new();
    BufReader::new(shell.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("the shell's pid");
    let pid = first.trim().to_string();
    assert!(!pid.is_empty(), "the shell said its pid");
    let o = area.sh_as(USER, "$ck unmount site");
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains(&format!("is busy: in use by {pid} (sh, working directory)")),
        "the busy unmount names the shell: {said}"
    );
    assert!(!said.contains("fusermount3 -u failed"), "{said}");
    assert!(mounted(&area.site), "a busy mount must not be torn");
    // The shell leaves (its input ends): the unmount goes through.
    drop(shell.stdin.take());
    let _ = shell.wait();
    area.sh("$ck unmount site");
    assert!(!mounted(&area.site));
}

#[test]
fn a_user_without_access_to_dev_fuse_is_told_what_helps() {
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let mode = std::fs::metadata("/dev/fuse").expect("/dev/fuse").mode();
    if mode & 0o006 == 0o006 {
        // Every user may open the device here: there is no refusal to see.
        return;
    }
    let area = UserArea::new(uid, gid);
    let nobody = PathBuf::from(area.root.path()).join("nobody-site");
    std::fs::create_dir(&nobody).expect("mkdir");
    std::os::unix::fs::chown(&nobody, Some(65534), Some(65534)).expect("chown");
    let o = area.sh_as("nobody", "$ck mount nobody-site");
    assert_eq!(o.status.code(), Some(1));
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("/dev/fuse is not open to this user, nobody (uid 65534)"),
        "{said}"
    );
    assert!(said.contains("chmod 0666 /dev/fuse"), "{said}");
    // The command to paste names the user: `$USER` would be root's own name in root's shell.
    assert!(
        said.contains("`setfacl -m u:nobody:rw /dev/fuse`"),
        "{said}"
    );
    assert!(!mounted(&nobody));
}

/// The daemon holds descriptors of the whole folder and of its store, with the user's ids. It
/// is not dumpable, so the user's other processes (an agent's tools) cannot open them through
/// `/proc/PID/fd` and change files behind the capture, nor read its memory or environment;
/// the daemon's own use of `/proc/self/fd` (xattrs of directories, reopening a file to
/// truncate it, a rewind's reads) still works.
#[test]
fn the_users_other_processes_cannot_reach_the_daemons_descriptors_or_memory() {
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    let area = UserArea::new(uid, gid);
    area.sh("printf 'one\\n' > site/a.txt && mkdir site/d && $ck mount site");
    let pid = area.sh("$ck status --json --dir site | sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'");
    let pid = pid.trim();
    assert!(!pid.is_empty(), "the daemon's pid from status");
    // A descriptor number the daemon holds, as root sees it: one of a directory of the folder.
    let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("root lists the daemon's descriptors")
        .flatten()
        .find(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .expect("the daemon holds a directory descriptor");
    for probe in [
        format!("ls /proc/{pid}/fd"),
        format!("ls /proc/{pid}/fd/{held}/"),
        format!("cat /proc/{pid}/fd/{held}/a.txt"),
        format!("cat /proc/{pid}/environ"),
        format!("dd if=/proc/{pid}/mem bs=1 count=1"),
    ] {
        let o = area.sh_as(USER, &probe);
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && said.contains("Permission denied"),
            "{probe}: {:?}, stdout {}, stderr {said}",
            o.status,
            String::from_utf8_lossy(&o.stdout)
        );
    }
    // The mount works on: writes, an xattr of a directory and a truncation (both through the
    // daemon's own `/proc/self/fd`), a rewind.
    area.sh(
        "cd site && echo 2 > .ckpt/turn && echo two > a.txt && setfattr -n user.k -v 1 d \
         && getfattr -n user.k --only-values d && truncate -s 1 a.txt && echo new > d/n",
    );
    assert_eq!(area.sh("getfattr -n user.k --only-values site/d"), "1");
    area.sh("$ck rewind 2 --dir site");
    assert_eq!(area.sh("cd site && cat a.txt && ls d"), "one\n");
    assert!(
        area.sh("getfattr -d site/d").is_empty(),
        "the xattr is rewound"
    );
    area.sh("$ck unmount site");
}

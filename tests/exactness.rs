//! Exactness through a real mount: the cases where a rewind used to finish with exit code 0
//! after writing another file's bytes into a file no rewound turn touched (an inode number
//! recycled by ext4 taken for "the same file"), and the attributes a rewind used to leave
//! behind (extended attributes, ACLs, hard-linked symlinks, the source of a `link`).
//!
//! The first three are `../shared/repro/{anchor_clobber,held_victim,orig_head_victim}.sh`,
//! each ending in the check the script prints as `EXACT`.

mod common;
use common::{Mounted, bin, require_fuse};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

fn sh(m: &Mounted, script: &str) -> String {
    m.sh(&format!("CK={}\n{script}", bin()))
}

fn ino(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).expect("lstat").ino()
}

#[test]
fn a_recycled_inode_number_is_never_taken_for_a_surviving_hard_link() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("a.txt"), "a at turn start\n").expect("write");
        std::fs::write(
            d.join("victim.txt"),
            "victim, never touched in turns >= 2\n",
        )
        .expect("write");
    });
    m.turn(2);
    sh(
        &m,
        "ln a.txt a.hard; echo edit >> a.txt; sed -i s/a/b/ a.txt; rm a.hard",
    );
    m.turn(3);
    std::fs::remove_file(m.path("victim.txt")).expect("rm victim");
    m.rewind(3);
    let victim_ino = ino(&m.path("victim.txt"));
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("victim.txt")).expect("read"),
        "victim, never touched in turns >= 2\n",
        "victim.txt clobbered"
    );
    assert_eq!(
        ino(&m.path("victim.txt")),
        victim_ino,
        "victim.txt rewritten"
    );
    let md = std::fs::metadata(m.path("victim.txt")).expect("stat");
    assert_eq!(md.nlink(), 1, "victim.txt made a hard link of a.txt");
    assert_eq!(
        std::fs::read_to_string(m.path("a.txt")).expect("read"),
        "a at turn start\n"
    );
    assert!(!m.path("a.hard").exists());
}

#[test]
fn a_file_held_open_across_turns_while_git_replaces_it_rewinds_exactly() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        let git = |args: &[&str]| {
            let st = Command::new("git")
                .args(args)
                .current_dir(d)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", "/tmp")
                .status()
                .expect("git");
            assert!(st.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["config", "user.email", "t@t"]);
        git(&["config", "user.name", "t"]);
        std::fs::write(d.join("a.txt"), "a at turn start\n").expect("write");
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "init"]);
    });
    let out = sh(
        &m,
        r#"exec 3>>held.log
echo "turn 1 op 0" >&3
git add -A && git commit -qm turn
echo "turn 1 op 5" >&3
git checkout -q -- .
echo 2 > .ckpt/turn
cp held.log /dev/stdout
ln a.txt a.hard; echo edit >> a.txt
sed -i s/a/b/ a.txt; rm a.hard
echo "turn 2 op 0" >&3
echo 3 > .ckpt/turn
echo "turn 3 op 0" >&3
rm held.log
exec 3>&-
$CK rewind 3 --dir . >/dev/null
$CK rewind 2 --dir . >/dev/null"#,
    );
    assert_eq!(
        std::fs::read_to_string(m.path("held.log")).expect("read"),
        out,
        "held.log is what it was when turn 2 began"
    );
    assert_eq!(
        std::fs::metadata(m.path("held.log")).expect("stat").nlink(),
        1
    );
}

/// A small ext4 image where freed inode numbers come back at once (`-N 2048`), loop-mounted
/// for the test and unmounted by its guard.
struct SmallExt4 {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl SmallExt4 {
    fn new() -> Option<Self> {
        let dir = tempfile::Builder::new()
            .prefix("ckpt-ext4-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let img = dir.path().join("img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mkdir");
        let ok = Command::new("truncate")
            .args(["-s", "64M"])
            .arg(&img)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("mkfs.ext4")
                .args(["-q", "-N", "2048"])
                .arg(&img)
                .status()
                .is_ok_and(|s| s.success())
            && Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&mnt)
                .status()
                .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "cannot loop-mount an ext4 image (needs root and mkfs.ext4)"
            );
            eprintln!("skipping: cannot loop-mount an ext4 image");
            return None;
        }
        Some(Self { dir, mounted: true })
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for SmallExt4 {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.path()).status();
        }
    }
}

#[test]
fn orig_head_recreated_with_a_recycled_number_is_not_taken_for_a_lost_hard_link() {
    if !require_fuse() {
        return;
    }
    let Some(img) = SmallExt4::new() else {
        return;
    };
    let d = img.path().join("project");
    std::fs::create_dir(&d).expect("mkdir");
    let setup = Command::new("sh")
        .arg("-ec")
        .arg(
            "git init -q && git config user.email t@t && git config user.name t
mkdir src; printf '#!/bin/sh\\necho hi\\n' > src/run.sh; chmod 755 src/run.sh
git add -A && git commit -qm c1 && git commit -q --allow-empty -m c2
git reset -q --soft HEAD~1 && git commit -q --allow-empty -m c3",
        )
        .current_dir(&d)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", "/tmp")
        .status()
        .expect("sh");
    assert!(setup.success());
    let mut m = Mounted::adopt(&d);
    let expected = std::fs::read(d.join(".git/ORIG_HEAD")).expect("ORIG_HEAD");
    m.turn(2);
    sh(
        &m,
        "ln -f src/run.sh src/x.hard; chmod 700 src/run.sh; sed -i s/hi/ho/ src/run.sh",
    );
    m.turn(3);
    sh(&m, "git reset -q --soft HEAD~1; rm src/x.hard");
    m.rewind(3);
    m.rewind(2);
    assert_eq!(
        std::fs::read(d.join(".git/ORIG_HEAD")).expect("ORIG_HEAD"),
        expected,
        "ORIG_HEAD got another file's bytes"
    );
    let md = std::fs::metadata(d.join(".git/ORIG_HEAD")).expect("stat");
    assert_eq!((md.nlink(), md.mode() & 0o777), (1, 0o644));
    assert_eq!(
        std::fs::read_to_string(d.join("src/run.sh")).expect("read"),
        "#!/bin/sh\necho hi\n"
    );
    m.unmount();
}

/// `getfattr -d -m -` of a path (no symlink followed), as "name=value" lines.
fn xattrs(p: &Path) -> String {
    let o = Command::new("getfattr")
        .args(["-h", "-d", "-m", "-", "-e", "hex", "--absolute-names"])
        .arg(p)
        .output()
        .expect("getfattr (package attr)");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn setfattr(args: &[&str], p: &Path) {
    let st = Command::new("setfattr")
        .args(args)
        .arg(p)
        .status()
        .expect("setfattr (package attr)");
    assert!(st.success(), "setfattr {args:?} {}", p.display());
}

fn setfacl(args: &[&str], p: &Path) {
    let st = Command::new("setfacl")
        .args(args)
        .arg(p)
        .status()
        .expect("setfacl (package acl)");
    assert!(st.success(), "setfacl {args:?} {}", p.display());
}

#[test]
fn extended_attributes_and_acls_of_files_dirs_and_symlinks_come_back_exactly() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "file\n").expect("write");
        std::fs::create_dir(d.join("dir")).expect("mkdir");
        std::os::unix::fs::symlink("f", d.join("sl")).expect("symlink");
        std::fs::write(d.join("untouched"), "u\n").expect("write");
    });
    let (f, dir, sl) = (m.path("f"), m.path("dir"), m.path("sl"));
    setfattr(&["-n", "user.origin", "-v", "human"], &f);
    setfattr(&["-n", "user.gone", "-v", "0x00ff01"], &f);
    setfattr(&["-n", "trusted.mark", "-v", "t1"], &f);
    setfattr(&["-n", "user.d", "-v", "dir attr"], &dir);
    setfattr(&["-h", "-n", "trusted.l", "-v", "on the link"], &sl);
    setfacl(&["-m", "u:nobody:r--"], &f);
    setfacl(&["-d", "-m", "g::r-x"], &dir);
    let before: Vec<String> = [&f, &dir, &sl].iter().map(|p| xattrs(p)).collect();
    let modes: Vec<u32> = [&f, &dir]
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").mode())
        .collect();
    let untouched = ino(&m.path("untouched"));
    m.turn(2);
    setfattr(&["-n", "user.origin", "-v", "agent"], &f);
    setfattr(&["-x", "user.gone"], &f);
    setfattr(&["-n", "user.added", "-v", "new"], &f);
    setfacl(&["-b"], &f);
    setfattr(&["-x", "user.d"], &dir);
    setfacl(&["-k"], &dir);
    setfattr(&["-h", "-n", "trusted.l", "-v", "changed"], &sl);
    m.rewind(2);
    let after: Vec<String> = [&f, &dir, &sl].iter().map(|p| xattrs(p)).collect();
    assert_eq!(
        after, before,
        "attributes are what they were when turn 2 began"
    );
    let modes_after: Vec<u32> = [&f, &dir]
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").mode())
        .collect();
    assert_eq!(modes_after, modes, "modes (and ACL masks) as before");
    assert_eq!(ino(&m.path("untouched")), untouched);

    // A file removed and a directory removed come back with their attributes too.
    m.turn(3);
    std::fs::remove_file(&f).expect("rm");
    std::fs::remove_dir(&dir).expect("rmdir");
    m.rewind(3);
    let again: Vec<String> = [&f, &dir, &sl].iter().map(|p| xattrs(p)).collect();
    assert_eq!(again, before);
}

#[test]
fn a_hard_linked_symlink_comes_back_as_one_inode() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    sh(&m, "ln -s target sl; ln sl sl2");
    assert_eq!(
        std::fs::symlink_metadata(m.path("sl"))
            .expect("lstat")
            .nlink(),
        2
    );
    m.turn(2);
    sh(&m, "rm sl sl2");
    m.rewind(2);
    let (a, b) = (m.path("sl"), m.path("sl2"));
    assert_eq!(
        std::fs::read_link(&a).expect("readlink"),
        Path::new("target")
    );
    assert_eq!(ino(&a), ino(&b), "one inode again");
    assert_eq!(std::fs::symlink_metadata(&a).expect("lstat").nlink(), 2);
}

#[test]
fn a_write_through_a_new_hard_link_is_undone_in_its_source() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "original\n").expect("write"));
    let a_ino = ino(&m.path("a"));
    m.turn(2);
    // `a` itself is never named after the link: only the new name is written.
    sh(&m, "ln a b; echo appended >> b");
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("a")).expect("read"),
        "original\n"
    );
    let md = std::fs::metadata(m.path("a")).expect("stat");
    assert_eq!(
        (md.nlink(), md.ino()),
        (1, a_ino),
        "in place, one link again"
    );
    assert!(!m.path("b").exists());
}

/// Inode number, mode and bytes of each of `names`, through the mount.
fn inode_mode_bytes(m: &Mounted, names: &[&str]) -> Vec<(u64, u32, Vec<u8>)> {
    names
        .iter()
        .map(|n| {
            let md = std::fs::symlink_metadata(m.path(n)).expect("lstat");
            (md.ino(), md.mode(), std::fs::read(m.path(n)).expect("read"))
        })
        .collect()
}

#[test]
fn files_rewritten_in_place_come_back_whole_whether_they_grew_or_shrank() {
    if !require_fuse() {
        return;
    }
    let long = "0123456789abcdef".repeat(1024);
    let m = Mounted::with(|d| {
        std::fs::write(d.join("long.txt"), &long).expect("write");
        std::fs::write(d.join("short.txt"), "short\n").expect("write");
        std::fs::write(d.join("a"), "linked\n").expect("write");
        std::fs::hard_link(d.join("a"), d.join("b")).expect("link");
        std::fs::write(d.join("suid.bin"), "#!/bin/sh\n").expect("write");
    });
    sh(&m, "chmod 4755 suid.bin");
    let names = ["long.txt", "short.txt", "a", "b", "suid.bin"];
    let before = inode_mode_bytes(&m, &names);
    m.turn(2);
    // Shrunk, grown (past the blocks it had), appended through the other name of a link
    // group, and a set-user-id file written and its mode changed; `sync` puts the blocks on
    // disk, as they are by the time a user rewinds (a rewind writes over them in place and
    // cuts each file to its length).
    sh(
        &m,
        "printf abc > long.txt; head -c 200000 /dev/zero >> short.txt; \
         echo more >> b; echo x >> suid.bin; chmod 755 suid.bin; sync",
    );
    m.rewind(2);
    let after = inode_mode_bytes(&m, &names);
    for ((name, was), now) in names.iter().zip(&before).zip(&after) {
        assert_eq!(was.2.len(), now.2.len(), "{name}: length");
        assert!(was.2 == now.2, "{name}: bytes differ");
        assert_eq!(was.1, now.1, "{name}: mode");
        assert_eq!(was.0, now.0, "{name}: rewritten in place, same inode");
    }
    assert_eq!(std::fs::metadata(m.path("a")).expect("stat").nlink(), 2);
}

#[test]
fn renewals_of_a_whole_recreated_tree_reach_the_journal_and_a_later_rewind() {
    if !require_fuse() {
        return;
    }
    // More hard-linked pairs than one journal record of renewals holds (1,000): a rewind that
    // recreates them all writes its renewals in several records, and every one must reach the
    // index again when the store is opened anew.
    const PAIRS: usize = 1500;
    let mut m = Mounted::with(|d| {
        std::fs::create_dir(d.join("t")).expect("mkdir");
        for i in 0..PAIRS {
            let a = d.join(format!("t/a{i}"));
            std::fs::write(&a, format!("pair {i}\n")).expect("write");
            std::fs::hard_link(&a, d.join(format!("t/b{i}"))).expect("link");
        }
    });
    m.turn(2);
    // Each `a` captured with the identity of its inode.
    sh(&m, "for f in t/a*; do echo more >> \"$f\"; done");
    m.turn(3);
    sh(&m, "rm -rf t");
    // Recreated: each pair is one fresh inode, which the renewals name for turn 2's records.
    m.rewind(3);
    m.unmount();
    m.remount();
    m.rewind(2);
    for i in 0..PAIRS {
        let (a, b) = (m.path(&format!("t/a{i}")), m.path(&format!("t/b{i}")));
        assert_eq!(
            std::fs::read_to_string(&a).expect("read"),
            format!("pair {i}\n"),
            "t/a{i}"
        );
        assert_eq!(ino(&a), ino(&b), "t/a{i} and t/b{i} one inode again");
        assert_eq!(std::fs::metadata(&a).expect("stat").nlink(), 2, "t/a{i}");
    }
    m.unmount();
    let journal = std::fs::read_to_string(m.dir.join(".ckpt/journal.jsonl")).expect("journal");
    let records = journal.matches("\"op\":\"renewed\"").count();
    assert!(
        records >= 2,
        "{records} renewal records for {PAIRS} recreated files"
    );
}

/// A rewind that leaves a file as it is because it holds its target's bytes, although a rewound
/// turn replaced its inode (`git checkout -- .`, an editor's save by rename), must say that the
/// file there now stands for the recorded inode: an older turn's record of another name of that
/// inode's hard-link group finds it through that. Without it, the later rewind found no name
/// holding the inode and restored the other name alone, silently splitting the group.
#[test]
fn a_link_replaced_by_its_own_bytes_is_found_by_a_later_rewind() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "data\n").expect("write");
        std::fs::hard_link(d.join("f"), d.join("g")).expect("link");
    });
    m.turn(2);
    sh(&m, "rm f");
    m.turn(3);
    sh(&m, "cp g g.tmp && mv g.tmp g");
    // Leaves g as it is (the same bytes), another inode than turn 3's record of it.
    m.rewind(3);
    m.rewind(2);
    let (f, g) = (m.path("f"), m.path("g"));
    assert_eq!(std::fs::read_to_string(&f).expect("read"), "data\n");
    assert_eq!(ino(&f), ino(&g), "f and g one inode again");
    assert_eq!(std::fs::metadata(&f).expect("stat").nlink(), 2);
}

/// A prune while a process writes: a capture stores its pre-image's bytes before it takes the
/// store's lock to record them, and a prune removes every blob no record names. A prune that
/// ran between the two removed the bytes of a capture about to be recorded, and the rewind
/// then found that file's pre-image missing. The daemon now holds every capture back for a
/// prune (as for a rewind or a turn switch).
#[test]
fn a_prune_while_files_are_first_written_keeps_every_pre_image() {
    if !require_fuse() {
        return;
    }
    const FILES: usize = 3000;
    let body = |i: usize| format!("turn-start bytes of f{i:04}\n");
    let m = Mounted::with(|d| {
        std::fs::create_dir(d.join("w")).expect("mkdir");
        for i in 0..FILES {
            std::fs::write(d.join(format!("w/f{i:04}")), body(i)).expect("write");
        }
    });
    m.turn(2);
    let mut writer = Command::new("python3")
        .arg("-c")
        .arg(
            "import os, sys\n\
             d = sys.argv[1]\n\
             for n in sorted(os.listdir(d)):\n\
             \x20   with open(os.path.join(d, n), 'r+b') as f: f.write(b'X')\n",
        )
        .arg(m.path("w"))
        .spawn()
        .expect("python3");
    let mut prunes = 0;
    while writer.try_wait().expect("wait").is_none() {
        // Both kinds: one that keeps the journal, and one that rewrites it.
        let out = if prunes % 2 == 0 {
            m.cli(&["prune", "--keep-turns", "2"])
        } else {
            m.cli(&["prune", "--drop-undo", "--yes"])
        };
        assert!(
            out.status.success(),
            "prune: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        prunes += 1;
    }
    assert!(writer.wait().expect("wait").success());
    assert!(prunes >= 3, "the prunes ran beside the writes ({prunes})");
    let fsck = m.cli(&["fsck"]);
    assert!(
        fsck.status.success(),
        "fsck after the prunes: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    m.rewind(2);
    for i in 0..FILES {
        let got = std::fs::read_to_string(m.path(&format!("w/f{i:04}"))).expect("read");
        assert_eq!(got, body(i), "w/f{i:04} after the rewind");
    }
}

/// Bytes of `rel` the kernel holds in its page cache, as `fincore` (mincore through a mapping
/// of a fresh open) counts them: so this open itself kept the pages, or it would find none.
fn resident(m: &Mounted, rel: &str) -> u64 {
    let out = m.sh(&format!("fincore --bytes --noheadings --output RES {rel}"));
    out.trim().parse().expect("fincore's byte count")
}

/// A hard link rewritten in place by a rewind through a name whose directory the kernel does
/// not know (so the inode table cannot reach that name): the pages the kernel keeps for the
/// link it still knows, under another directory, must go all the same. Found in review: the
/// refresh skipped such a name before it looked for the node holding its inode.
#[test]
fn pages_of_a_link_are_dropped_when_its_rewound_name_lies_where_the_kernel_forgot() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with_args(
        |d| {
            std::fs::create_dir(d.join("x")).expect("mkdir");
            std::fs::create_dir(d.join("z")).expect("mkdir");
            std::fs::write(d.join("x/a"), "linked bytes one\n").expect("write");
            std::fs::hard_link(d.join("x/a"), d.join("z/c")).expect("link");
        },
        &["--no-passthrough"],
    );
    m.turn(2);
    // The same size, so that no size change makes the kernel drop the pages by itself.
    m.sh("printf 'linked bytes two\\n' > x/a");
    let a_ino = ino(&m.path("x/a"));
    // A new daemon (the folder mounted again, as after a reboot) whose kernel is told of z/c
    // and never of x: x/a is a name its inode table cannot reach. (Not `drop_caches`, which
    // would also drop the pages other tests running beside this one look at.)
    m.unmount();
    m.remount_with(&["--no-passthrough"]);
    m.sh("cat z/c > /dev/null; cat z/c > /dev/null");
    assert!(resident(&m, "z/c") > 0, "a second open dropped z/c's pages");
    assert_eq!(m.sh("cat z/c"), "linked bytes two\n");
    m.rewind(2);
    // Read first: a lookup of x/a would hand the kernel the inode's new attributes, and their
    // new mtime would make it drop the pages by itself.
    assert_eq!(
        m.sh("cat z/c"),
        "linked bytes one\n",
        "an open of the link kept pages of bytes the rewind took back"
    );
    assert_eq!(
        ino(&m.path("x/a")),
        a_ino,
        "the rewind rewrote the group in place (the case under test)"
    );
    assert_eq!(m.sh("cat x/a"), "linked bytes one\n");
}

/// Where the daemon serves every read (no kernel passthrough, as on a user's mount), an open
/// keeps the pages the kernel holds of a file it is proven to be (a file read again costs no
/// read request), and a rewind that rewrites files in place (a plain file, a hard-link group
/// known to the kernel by one name) leaves no page of the turn's bytes behind: not for a new
/// open, nor for a descriptor held open across the rewind.
#[test]
fn pages_kept_between_opens_never_outlive_a_rewind_that_changed_the_file() {
    use std::io::{BufRead, Write};
    use std::process::Stdio;
    if !require_fuse() {
        return;
    }
    let m = Mounted::with_args(
        |d| {
            std::fs::write(d.join("f"), "turn-one bytes A\n").expect("write");
            std::fs::write(d.join("g"), "linked bytes one\n").expect("write");
            std::fs::hard_link(d.join("g"), d.join("h")).expect("link");
        },
        &["--no-passthrough"],
    );
    m.turn(2);
    m.sh("cat f h > /dev/null");
    assert!(resident(&m, "f") > 0, "a second open dropped f's pages");
    // The same size, so that no size change makes the kernel drop the pages by itself.
    m.sh("printf 'turn-two bytes B\\n' > f; printf 'linked bytes two\\n' > g; cat f h > /dev/null");
    assert_eq!(m.sh("cat f h"), "turn-two bytes B\nlinked bytes two\n");
    let (f_ino, g_ino) = (ino(&m.path("f")), ino(&m.path("g")));
    // A reader holding f open across the rewind: it reads once before, once after.
    let mut reader = Command::new("python3")
        .arg("-c")
        .arg(
            "import os, sys\n\
             fd = os.open(sys.argv[1], os.O_RDONLY)\n\
             print(os.pread(fd, 64, 0).decode(), end='', flush=True)\n\
             sys.stdin.readline()\n\
             print(os.pread(fd, 64, 0).decode(), end='', flush=True)\n",
        )
        .arg(m.path("f"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = std::io::BufReader::new(reader.stdout.take().expect("stdout"));
    let mut before = String::new();
    out.read_line(&mut before).expect("first read");
    assert_eq!(before, "turn-two bytes B\n");
    m.rewind(2);
    assert_eq!(
        (ino(&m.path("f")), ino(&m.path("g"))),
        (f_ino, g_ino),
        "the rewind rewrote f and the group in place (the case under test)"
    );
    let mut stdin = reader.stdin.take().expect("stdin");
    stdin.write_all(b"\n").expect("signal");
    drop(stdin);
    let mut after = String::new();
    out.read_line(&mut after).expect("second read");
    assert!(reader.wait().expect("wait").success());
    assert_eq!(
        after, "turn-one bytes A\n",
        "the held descriptor read the turn's bytes"
    );
    assert_eq!(m.sh("cat f"), "turn-one bytes A\n");
    assert_eq!(m.sh("cat h g"), "linked bytes one\nlinked bytes one\n");
    // And the pages are kept again from the file as it is now.
    m.sh("cat f > /dev/null");
    assert!(resident(&m, "f") > 0, "pages of the restored f not kept");
    assert_eq!(m.sh("cat f"), "turn-one bytes A\n");
}

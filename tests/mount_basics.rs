//! The mount's contract end to end: capture per turn, rewind, control files, remount.

mod common;
use common::{Mounted, assert_same_tree, require_fuse, tree};

#[test]
fn rewinding_a_turn_also_undoes_later_turns() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "start of turn 1\n").expect("write"));
    m.sh("echo 'edited in turn 1' > f");
    m.turn(2);
    m.sh("echo 'edited in turn 2' > f");
    m.turn(3);
    m.sh("echo 'edited in turn 3' > f; echo new > g");
    m.rewind(1);
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "start of turn 1\n"
    );
    assert!(!m.path("g").exists());
}

#[test]
fn first_capture_in_a_turn_wins_and_new_paths_are_deleted() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("echo two > a; echo three > a; echo x >> a; mkdir -p n/e/w; echo y > n/e/w/f");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn a_compressed_store_rewinds_exactly_and_checks_clean() {
    if !require_fuse() {
        return;
    }
    let mut m = common::Mounted::with_args(
        |d| {
            std::fs::write(d.join("code.rs"), "fn main() {}\n".repeat(5000)).expect("write");
            std::fs::write(d.join("small"), "tiny\n").expect("write");
        },
        &["--compress"],
    );
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("sed -i s/main/start/ code.rs; echo changed > small; rm code.rs");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    // Large pre-images are loose `.zst` files, small ones packed with a `z` index entry.
    let mut zst = 0;
    for shard in std::fs::read_dir(m.dir.join(".ckpt/blobs")).expect("blobs") {
        let shard = shard.expect("shard").path();
        for f in std::fs::read_dir(&shard).expect("dir") {
            let f = f.expect("entry").path();
            let name = f.to_string_lossy().into_owned();
            if name.ends_with(".zst") {
                zst += 1;
            } else if name.ends_with(".idx") {
                let text = std::fs::read_to_string(&f).expect("idx");
                zst += text.lines().filter(|l| l.ends_with(" z")).count();
            }
        }
    }
    assert!(zst >= 2, "pre-images stored compressed: {zst}");
    let o = m.cli(&["fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    m.remount();
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn listings_cached_by_the_kernel_follow_changes_and_rewinds() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::create_dir_all(d.join("d/s")).expect("mkdir");
        for f in ["d/a", "d/b", "d/s/x"] {
            std::fs::write(d.join(f), f).expect("write");
        }
    });
    m.turn(2);
    let d = m.path("d");
    let start = names(&d);
    assert_eq!(start, ["a", "b", "s"]);
    // Listed twice so the second comes from the kernel's directory cache.
    assert_eq!(names(&d), start);
    m.sh("rm d/b; touch d/c; rm -rf d/s; mkdir d/t");
    assert_eq!(names(&d), ["a", "c", "t"]);
    assert_eq!(names(&d), ["a", "c", "t"]);
    m.rewind(2);
    assert_eq!(names(&d), start);
    assert_eq!(names(&m.path("d/s")), ["x"]);
    // The listing the daemon gives agrees with the host folder's.
    let mut m = m;
    m.unmount();
    assert_eq!(names(&m.dir.join("d")), start);
}

#[test]
fn names_seen_missing_reappear_at_once_when_a_rewind_restores_them() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::create_dir_all(d.join("d/s")).expect("mkdir");
        std::fs::write(d.join("f"), "f at the start\n").expect("write");
        std::fs::write(d.join("d/s/x"), "x at the start\n").expect("write");
        std::fs::write(d.join("a"), "a at the start\n").expect("write");
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("rm f; rm -rf d; mv a b");
    // Each missing name is looked up twice: the second answer comes from the kernel's
    // negative entry, which the rewind below must drop.
    for name in ["f", "d", "d/s/x", "a", "new"] {
        for _ in 0..2 {
            assert!(
                std::fs::symlink_metadata(m.path(name)).is_err(),
                "{name} is missing"
            );
        }
    }
    let read = |rel: &str| std::fs::read_to_string(m.path(rel)).expect(rel);
    // A name seen missing and then created through the mount.
    m.sh("echo made > new");
    assert_eq!(read("new"), "made\n");
    m.rewind(2);
    assert_eq!(read("f"), "f at the start\n");
    assert_eq!(read("d/s/x"), "x at the start\n");
    assert_eq!(read("a"), "a at the start\n");
    assert!(!m.path("b").exists() && !m.path("new").exists());
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn a_big_directory_lists_whole_and_comes_back_after_rm_rf() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::create_dir(d.join("big")).expect("mkdir");
        for i in 0..3000 {
            std::fs::write(d.join(format!("big/file-with-a-longish-name-{i:05}")), "x")
                .expect("write");
        }
    });
    let expect: Vec<String> = (0..3000)
        .map(|i| format!("file-with-a-longish-name-{i:05}"))
        .collect();
    assert_eq!(names(&m.path("big")), expect);
    // `ls -f` reads in the kernel's getdents order, several replies deep.
    assert_eq!(m.sh("ls -f big | grep -c longish").trim(), "3000");
    m.turn(2);
    m.sh("rm -rf big");
    assert!(!m.path("big").exists());
    m.rewind(2);
    assert_eq!(names(&m.path("big")), expect);
}

#[test]
fn a_file_held_open_for_reading_is_written_through_a_second_open() {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::FileExt;
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "0123456789").expect("write"));
    m.turn(2);
    // The read-only open registers the inode's passthrough backing file; the writable opens
    // after it share that registration and must still write.
    let mut reader = std::fs::File::open(m.path("f")).expect("open for reading");
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("f"))
        .expect("open for writing");
    writer.write_all_at(b"abc", 2).expect("pwrite");
    let mut appender = std::fs::OpenOptions::new()
        .append(true)
        .open(m.path("f"))
        .expect("open for appending");
    appender.write_all(b"!").expect("append");
    drop((writer, appender));
    let mut seen = String::new();
    reader.rewind().expect("seek");
    reader.read_to_string(&mut seen).expect("read");
    assert_eq!(seen, "01abc56789!");
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "01abc56789!"
    );
    drop(reader);
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "0123456789"
    );
}

#[test]
fn capturing_a_file_leaves_its_atime_as_it_was() {
    if !require_fuse() {
        return;
    }
    // With kernel passthrough the kernel reads the host file itself; without it the daemon
    // serves a read-write open's reads through the descriptor the capture read.
    for args in [&["--ttl", "0"][..], &["--ttl", "0", "--no-passthrough"][..]] {
        captures_leave_atimes_and_reads_move_them(args);
    }
}

fn captures_leave_atimes_and_reads_move_them(args: &[&str]) {
    // atime well before mtime: any plain read of these files would update it (relatime).
    // No attribute caching, so each `stat` below asks the daemon for the file's own atime.
    let setup = |d: &std::path::Path| {
        for f in ["chmodded", "appended", "rewritten", "dir/inside"] {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "turn-start bytes\n").expect("write");
        }
    };
    let m = Mounted::with_args(setup, args);
    m.sh("touch -a -d @1000000000 chmodded appended rewritten dir dir/inside");
    m.turn(2);
    // chmod is captured by name, an append through the open's own descriptor, a rename of a
    // directory by walking it
    m.sh("chmod 600 chmodded; echo more >> appended; mv dir moved");
    let atimes = m.sh("stat -c '%n %X' chmodded appended moved moved/inside");
    assert_eq!(
        atimes,
        "chmodded 1000000000\nappended 1000000000\nmoved 1000000000\nmoved/inside 1000000000\n",
        "{args:?}: a capture read a file or listing with an atime update"
    );
    // A read-write open is captured through the caller's own descriptor: the capture leaves
    // the atime, and the caller's read through that descriptor then updates it.
    let rw = m.sh(r#"python3 - <<'PY'
import os
fd = os.open("rewritten", os.O_RDWR)
os.pwrite(fd, b"T", 0)
before = os.stat("rewritten").st_atime_ns // 10**9
os.pread(fd, 4, 0)
after = os.stat("rewritten").st_atime_ns // 10**9
print(before, after != before)
PY"#);
    assert_eq!(
        rw, "1000000000 True\n",
        "{args:?}: the capture read with an atime update, or the caller's read made none"
    );
    m.rewind(2);
    assert_eq!(
        std::fs::read_to_string(m.path("appended")).expect("read"),
        "turn-start bytes\n"
    );
    // and a plain read through the mount still updates it
    m.sh("cat chmodded > /dev/null");
    assert_ne!(
        m.sh("stat -c %X chmodded"),
        "1000000000\n",
        "{args:?}: reads stopped updating atime"
    );
}

#[test]
fn attributes_set_through_an_open_file_reach_that_file_even_once_renamed_over() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "f at turn start\n").expect("write");
        std::fs::write(d.join("g"), "g at turn start\n").expect("write");
    });
    m.turn(2);
    // fchmod, fsetxattr, fgetxattr, flistxattr and fremovexattr through a descriptor held
    // open (the daemon uses the open file itself), before and after another file is renamed
    // over its name
    let out = m.sh(r#"python3 - <<'PY'
import os
fd = os.open("f", os.O_RDWR)
os.fchmod(fd, 0o640)
os.setxattr(fd, "user.one", b"1")
os.setxattr(fd, "user.two", b"2")
os.removexattr(fd, "user.two")
print(os.getxattr(fd, "user.one"), sorted(os.listxattr(fd)))
os.rename("g", "f")
os.setxattr(fd, "user.after", b"3")
os.fchmod(fd, 0o600)
st = os.fstat(fd)
print(oct(st.st_mode & 0o777), sorted(os.listxattr(fd)), sorted(os.listxattr("f")))
print(oct(os.stat("f").st_mode & 0o777), open("f").read().strip())
PY"#);
    assert_eq!(
        out,
        "b'1' ['user.one']\n\
         0o600 ['user.after', 'user.one'] []\n\
         0o644 g at turn start\n"
    );
    m.rewind(2);
    assert_eq!(
        m.sh("cat f g; stat -c '%a' f g"),
        "f at turn start\ng at turn start\n644\n644\n"
    );
}

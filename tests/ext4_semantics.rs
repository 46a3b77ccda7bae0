//! Behaviours where the mount must give what ext4 gives (found by xfstests generic). Each test
//! runs the same operations on a plain directory of the filesystem under `/tmp` (ext4 on the
//! test machines; the mounted folders live there too, so it is also the mount's host) and
//! through a mount, and compares the two exactly. Where a value is a timestamp, the mount's is
//! also compared with the host file's own, read through a descriptor of the folder opened
//! before the mount covered it.

mod common;
use common::{Mounted, require_fuse};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A plain directory on the filesystem under `/tmp`, to run the same operations on.
fn plain_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ckpt-ext4-")
        .tempdir_in("/tmp")
        .expect("tempdir")
}

/// Whether `tool` is installed; under `CI=true` (which installs it, see `.ci/run`) a missing
/// one is a failure.
fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{tool} is missing (.ci/run installs it)"
        );
        eprintln!("skipping: {tool} is missing");
    }
    found
}

/// Runs `script` with `sh -e` in `dir`; panics with its output unless it succeeds.
fn sh_in(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "script failed in {}: {script}\nstdout: {}\nstderr: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A mount whose host folder stays reachable: `host(rel)` is the path of `rel` on the host
/// filesystem itself (through a descriptor of the folder opened before the mount covered it),
/// for processes started by this test.
struct HostView {
    m: Mounted,
    folder: File,
}

impl HostView {
    fn new(args: &[&str]) -> Self {
        let mut folder = None;
        let m = Mounted::with_args(
            |d| folder = Some(File::open(d).expect("open the folder before the mount")),
            args,
        );
        let folder = folder.expect("set up");
        Self { m, folder }
    }

    fn host(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}/{rel}",
            std::process::id(),
            self.folder.as_raw_fd()
        ))
    }
}

// ---- 1. generic/035: an open directory after rmdir or a rename over it ----

/// What `fstat` of an open directory gives after it lost its name: `Ok((nlink, mode, is_dir))`
/// or the errno.
type DirStat = Result<(u64, u32, bool), i32>;

fn fstat_dir(f: &File) -> DirStat {
    f.metadata()
        .map(|m| (m.nlink(), m.permissions().mode(), m.is_dir()))
        .map_err(|e| e.raw_os_error().unwrap_or(0))
}

/// Opens directories, removes them (rmdir, a rename over each), then `fstat`s the open
/// descriptors; also `stat .` in a shell whose working directory was removed.
fn open_directories_after_removal(root: &Path) -> (Vec<(&'static str, DirStat)>, String) {
    for d in ["r1", "r2", "r3", "r4", "r5/sub"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::set_permissions(root.join("r2"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod");
    let r2 = File::open(root.join("r2")).expect("open r2");
    let r3 = File::open(root.join("r3")).expect("open r3");
    let sub = File::open(root.join("r5/sub")).expect("open r5/sub");
    // Stat once before, so that the mount's kernel has the attributes cached.
    let before = fstat_dir(&r2);
    std::fs::rename(root.join("r1"), root.join("r2")).expect("rename r1 over r2");
    std::fs::remove_dir(root.join("r3")).expect("rmdir r3");
    std::fs::rename(root.join("r4"), root.join("r5/sub")).expect("rename r4 over r5/sub");
    let results = vec![
        ("r2 before", before),
        ("r2 renamed over", fstat_dir(&r2)),
        ("r3 removed", fstat_dir(&r3)),
        ("r5/sub renamed over", fstat_dir(&sub)),
        // Asked twice: the second answer may come from the kernel's cache.
        ("r3 removed, again", fstat_dir(&r3)),
    ];
    let cwd = sh_in(
        root,
        "mkdir gone; cd gone; rmdir ../gone; stat -c '%h %F' .",
    );
    (results, cwd)
}

#[test]
fn an_open_directory_answers_fstat_with_nlink_0_after_rmdir_or_a_rename_over_it() {
    if !require_fuse() {
        return;
    }
    let plain = plain_dir();
    let expect = open_directories_after_removal(plain.path());
    assert_eq!(
        expect.0[1].1.map(|s| s.0),
        Ok(0),
        "ext4 gives nlink 0: {expect:?}"
    );
    let m = Mounted::new();
    let got = open_directories_after_removal(&m.dir);
    assert_eq!(got, expect, "the mount differs from the plain directory");
}

// ---- 2. generic/080, 215: timestamps after a write through a shared mapping ----

/// The timestamps of `m.dat` (created here) before, during and after a write through a
/// shared mapping, as `[mtime_ns, ctime_ns]` seen at `path` and, when given, at `host` right
/// after.
const MMAP_SCRIPT: &str = r#"
import mmap, os, sys, time
path, host = sys.argv[1], sys.argv[2]
def times(p):
    st = os.stat(p)
    return [st.st_mtime_ns, st.st_ctime_ns]
def both():
    return [times(path), times(host)]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"\0" * 8192)
os.fsync(fd)
os.close(fd)
os.utime(path, (1000000000, 1000000000))
before = both()
time.sleep(0.05)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 8192)
# Mapping marks the atime stale, and a stat asking for it would refresh everything: stat
# now, so that what follows shows what the write itself leaves.
os.stat(path)
m[0:5] = b"hello"
during = both()
m.flush()
m.close()
os.close(fd)
after = both()
# Once more with attributes cached after the last close: a read-write open must drop them.
time.sleep(0.05)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 8192)
m.close()
os.close(fd)
os.stat(path)
time.sleep(0.05)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 8192)
os.stat(path)
m[4096:4101] = b"again"
m.flush()
m.close()
os.close(fd)
again = both()
print(before, during, after, again)
"#;

type Times = [[i64; 2]; 2];

fn mmap_times(path: &Path, host: &Path) -> [Times; 4] {
    let out = Command::new("python3")
        .arg("-c")
        .arg(MMAP_SCRIPT)
        .arg(path)
        .arg(host)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let nums: Vec<i64> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("number"))
        .collect();
    assert_eq!(nums.len(), 16, "{text}");
    let t = |i: usize| [[nums[i], nums[i + 1]], [nums[i + 2], nums[i + 3]]];
    [t(0), t(4), t(8), t(12)]
}

/// What ext4 gives: a mapped write moves mtime and ctime on at once (at the page fault), while
/// the file is still mapped; `msync` and the close change neither.
///
/// With `at_writeback` (the mount without kernel passthrough) the times move when the daemon
/// writes the mapped pages to the host (here at `msync`), not at the fault: the kernel keeps
/// no times of its own for FUSE files without its writeback cache, and the host's have not
/// moved before the pages reach it.
fn assert_ext4_shape(t: &[Times; 4], what: &str, at_writeback: bool) {
    let [before, during, after, again] = t;
    assert_eq!(before[0][0], 1_000_000_000_000_000_000, "{what}: {t:?}");
    let moved = if at_writeback { after } else { during };
    assert!(moved[0][0] > before[0][0], "{what}: mtime moved: {t:?}");
    assert!(moved[0][1] > before[0][1], "{what}: ctime moved: {t:?}");
    assert_eq!(
        after[0], moved[0],
        "{what}: unchanged by msync and close: {t:?}"
    );
    assert!(
        again[0][0] > after[0][0],
        "{what}: mtime moved again: {t:?}"
    );
}

#[test]
fn a_write_through_a_shared_mapping_moves_mtime_and_ctime_at_once() {
    if !require_fuse() || !have("python3") {
        return;
    }
    let plain = plain_dir();
    let p = plain.path().join("m.dat");
    assert_ext4_shape(&mmap_times(&p, &p), "ext4", false);
    for args in [&[][..], &["--no-passthrough"][..]] {
        let v = HostView::new(args);
        let t = mmap_times(&v.m.path("m.dat"), &v.host("m.dat"));
        assert_ext4_shape(&t, &format!("mount {args:?}"), !args.is_empty());
        for (i, pair) in t.iter().enumerate() {
            assert_eq!(
                pair[0], pair[1],
                "mount {args:?} vs host at step {i}: {t:?}"
            );
        }
    }
}

/// generic/080 as xfstests runs it: xfs_io maps, writes and syncs, exits, then `stat`.
#[test]
fn xfs_io_mapped_write_then_stat_shows_the_new_mtime() {
    if !require_fuse() || !have("xfs_io") {
        return;
    }
    let script = "xfs_io -f -c 'pwrite 0 4k' -c fsync m.dat >/dev/null
        touch -d @1000000000 m.dat
        stat -c '%Y' m.dat
        xfs_io -c 'mmap 0 4k' -c 'mread 0 4k' -c 'mwrite 0 4k' -c 'msync -s 0 4k' m.dat >/dev/null
        stat -c '%Y' m.dat";
    let plain = plain_dir();
    let ext4 = sh_in(plain.path(), script);
    let v = HostView::new(&[]);
    let got = v.m.sh(script);
    let host = std::fs::metadata(v.host("m.dat"))
        .expect("host stat")
        .mtime();
    let lines = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(lines(&ext4)[0], "1000000000");
    assert_ne!(lines(&ext4)[1], "1000000000", "ext4 moved the mtime");
    assert_eq!(lines(&got)[0], "1000000000");
    assert_eq!(
        lines(&got)[1],
        host.to_string(),
        "the mount shows the host's mtime"
    );
}

// ---- 3. generic/099, 319, 444, 697: the umask and a default ACL ----

const UMASK_SCRIPT: &str = "
    mkdir acl plain named
    setfacl -d -m u::r-x,g::r--,o::--- acl
    setfacl -d -m u::rwx,g::r-x,o::---,u:nobody:rwx,m::rwx named
    for d in acl plain named; do
        (umask 722; touch $d/f; mkdir $d/d; mkfifo $d/p; python3 -c 'import os; os.close(os.open(\"'$d'/o\", os.O_CREAT | os.O_RDWR, 0o640))')
        (umask 077; touch $d/g; mkdir $d/e)
        (umask 000; mkdir $d/z)
    done
    for d in acl plain named; do
        stat -c '%n %A' $d/f $d/d $d/p $d/o $d/g $d/e $d/z
    done
    getfacl -cp acl/f acl/d named/f named/d named/e named/z
";

#[test]
fn the_umask_applies_only_where_the_parent_has_no_default_acl() {
    if !require_fuse() || !have("setfacl") || !have("python3") {
        return;
    }
    let plain = plain_dir();
    let expect = sh_in(plain.path(), UMASK_SCRIPT);
    assert!(
        expect.contains("acl/f -r--r-----") && expect.contains("plain/f ----r--r--"),
        "what ext4 gives: {expect}"
    );
    let m = Mounted::new();
    assert_eq!(m.sh(UMASK_SCRIPT), expect);
}

// ---- 4. generic/375: the mode and ctime after setfacl and other xattr changes ----

const ACL_MODE_SCRIPT: &str = "
    touch a; chmod 0600 a; mkdir d; chmod 0700 d
    stat -c '%n %A' a d
    setfacl -m g::rwx a; setfacl -m g::r-x d
    stat -c '%n %A' a d
    setfacl -m u:nobody:r a; stat -c '%n %A' a
    setfacl -m m::r a; stat -c '%n %A' a
    setfacl -x u:nobody a; stat -c '%n %A' a
    setfacl -b a d; stat -c '%n %A' a d
    getfacl -cp a d
";

#[test]
fn a_mode_changed_by_setfacl_shows_at_once() {
    if !require_fuse() || !have("setfacl") {
        return;
    }
    let plain = plain_dir();
    let expect = sh_in(plain.path(), ACL_MODE_SCRIPT);
    assert!(expect.contains("a -rw-rwx---"), "what ext4 gives: {expect}");
    let m = Mounted::new();
    assert_eq!(m.sh(ACL_MODE_SCRIPT), expect);
}

/// Access ACLs set by a caller outside the file's group, and by one in it (uid 100 owns each
/// entry; `setpriv` drops the caller's other groups): `posix_acl_update_mode` clears
/// `S_ISGID` unless the caller is in the group or has `CAP_FSETID`, even when the ACL only
/// restates the mode. Another user reaches only an `--allow-other` mount.
const ACL_SETGID_OTHER_USER: &str = "
    touch f k; mkdir d
    chown 100:100 f d; chown 100:101 k; chmod 2755 f d k
    for e in f d k; do
        setpriv --reuid 100 --regid 101 --clear-groups setfacl -m u::rwx,g::rwx,o::rwx $e
    done
    touch x; chown 100:100 x; chmod 2750 x
    setpriv --reuid 100 --regid 101 --clear-groups setfacl -m u:nobody:r x
    stat -c '%n %A' f d k x
    getfacl -cp x
";

/// The same as root (the only caller a mount without `--allow-other` lets in), without
/// `CAP_FSETID` (dropped from the bounding set, so `setfacl` runs without it) or with it.
const ACL_SETGID_ROOT: &str = "
    touch g h i; mkdir e
    chown 100:100 g h e; chown 100:0 i; chmod 2755 g h e i
    setpriv --clear-groups --bounding-set -fsetid setfacl -m u::rwx,g::rwx,o::rwx g
    setpriv --clear-groups --bounding-set -fsetid setfacl -m u::rwx,g::r-x,o::rwx,u:nobody:r e
    setpriv --clear-groups setfacl -m u::rwx,g::rwx,o::rwx h
    setpriv --clear-groups --bounding-set -fsetid setfacl -m u::rwx,g::rwx,o::rwx i
    stat -c '%n %A' g e h i
    getfacl -cp e
";

#[test]
fn setfacl_by_a_caller_outside_the_group_clears_setgid_as_on_ext4() {
    if !require_fuse() || !have("setfacl") || !have("setpriv") {
        return;
    }
    let plain = plain_dir();
    // Uid 100 must reach the entries: the scratch directories are private by default.
    std::fs::set_permissions(plain.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let other = sh_in(plain.path(), ACL_SETGID_OTHER_USER);
    let root = sh_in(plain.path(), ACL_SETGID_ROOT);
    assert!(
        other.starts_with("f -rwxrwxrwx\nd drwxrwxrwx\nk -rwxrwsrwx\nx -rwxr-x---\n"),
        "what ext4 gives: {other}"
    );
    assert!(
        root.starts_with("g -rwxrwxrwx\ne drwxr-xrwx\nh -rwxrwsrwx\ni -rwxrwsrwx\n"),
        "what ext4 gives: {root}"
    );
    for io in [&[][..], &["--no-passthrough"][..]] {
        let m = Mounted::with_args(|_| {}, io);
        assert_eq!(m.sh(ACL_SETGID_ROOT), root, "mount {io:?}");
        let args = [io, &["--allow-other"][..]].concat();
        let m = Mounted::with_args(
            |d| {
                let parent = d.parent().expect("the scratch directory");
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod");
            },
            &args,
        );
        assert_eq!(m.sh(ACL_SETGID_OTHER_USER), other, "mount {args:?}");
    }
}

#[test]
fn the_ctime_after_an_xattr_change_is_the_hosts() {
    if !require_fuse() || !have("setfattr") {
        return;
    }
    let v = HostView::new(&[]);
    let times = |rel: &str| {
        let mount = std::fs::metadata(v.m.path(rel)).expect("stat");
        let host = std::fs::metadata(v.host(rel)).expect("host stat");
        (
            (mount.ctime(), mount.ctime_nsec()),
            (host.ctime(), host.ctime_nsec()),
        )
    };
    v.m.sh("touch f; mkdir d");
    for rel in ["f", "d"] {
        let (m0, h0) = times(rel);
        assert_eq!(m0, h0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        v.m.sh(&format!("setfattr -n user.k -v 1 {rel}"));
        let (m1, h1) = times(rel);
        assert!(h1 > h0, "the host's ctime moved");
        assert_eq!(m1, h1, "{rel}: after setxattr");
        std::thread::sleep(std::time::Duration::from_millis(20));
        v.m.sh(&format!("setfattr -x user.k {rel}"));
        let (m2, h2) = times(rel);
        assert!(h2 > h1, "the host's ctime moved");
        assert_eq!(m2, h2, "{rel}: after removexattr");
    }
}

// ---- 5. O_DIRECT, with and without kernel passthrough ----

const BLOCK: usize = 4096;

/// A buffer of `len` bytes whose start is aligned for direct I/O.
struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let buf = vec![0u8; len + BLOCK];
        let start = (BLOCK - buf.as_ptr() as usize % BLOCK) % BLOCK;
        Self { buf, start, len }
    }
    fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// An fsx-style run with `O_DIRECT` (fsx's odirect mode: every offset and length a multiple
/// of the block size, every buffer aligned): random writes, reads, truncations and fsyncs on
/// one file, each read checked against a model; then the file read whole through a buffered
/// descriptor. Returns what went differently, if anything.
fn direct_io_exercise(path: &Path, ops: usize, seed: u64) -> Result<(), String> {
    let mut rng = seed;
    let mut next = move || {
        rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| format!("open O_DIRECT: {e}"))?;
    let mut model: Vec<u8> = Vec::new();
    let max_blocks = 64u64;
    for i in 0..ops {
        let op = next() % 10;
        let off = (next() % max_blocks) as usize * BLOCK;
        let len = (1 + next() % 8) as usize * BLOCK;
        match op {
            0..=4 => {
                let mut b = Aligned::new(len);
                for (j, x) in b.bytes().iter_mut().enumerate() {
                    *x = (i as u8).wrapping_mul(31).wrapping_add(j as u8);
                }
                f.write_all_at(b.bytes(), off as u64)
                    .map_err(|e| format!("op {i}: pwrite {off}+{len}: {e}"))?;
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].copy_from_slice(b.bytes());
            }
            5..=7 => {
                let mut b = Aligned::new(len);
                let n = f
                    .read_at(b.bytes(), off as u64)
                    .map_err(|e| format!("op {i}: pread {off}+{len}: {e}"))?;
                let want = model.len().saturating_sub(off).min(len);
                let same = n == 0 || model.get(off..off + n) == Some(&b.bytes()[..n]);
                if n != want || !same {
                    return Err(format!(
                        "op {i}: pread {off}+{len} gave {n} bytes, model {want}"
                    ));
                }
            }
            8 => {
                let size = (next() % max_blocks) as usize * BLOCK;
                f.set_len(size as u64)
                    .map_err(|e| format!("op {i}: ftruncate {size}: {e}"))?;
                model.resize(size, 0);
            }
            _ => f
                .sync_data()
                .map_err(|e| format!("op {i}: fdatasync: {e}"))?,
        }
    }
    drop(f);
    let whole = std::fs::read(path).map_err(|e| format!("buffered read: {e}"))?;
    if whole != model {
        return Err(format!(
            "buffered read: {} bytes, model {}",
            whole.len(),
            model.len()
        ));
    }
    Ok(())
}

/// `dd` with direct I/O: a new file, an existing file rewritten in place (opened for writing
/// without truncation, so its pre-image is read through the daemon's descriptor), read back;
/// then one write that is not block-aligned. Returns each command's status and the bytes.
fn dd_direct(dir: &Path) -> (String, Vec<u8>) {
    let out = sh_in(
        dir,
        "dd if=/dev/zero of=new bs=4096 count=4 oflag=direct status=none && echo new ok
        dd if=pre of=copy bs=4096 iflag=direct status=none && echo read ok
        head -c 4096 /dev/zero | tr '\\0' x | dd of=pre bs=4096 seek=1 conv=notrunc iflag=fullblock oflag=direct status=none && echo in place ok
        cmp -s new /dev/zero -n 16384 && echo zeros
        dd if=pre bs=4096 iflag=direct status=none | cmp -s - pre && echo same through both
        if printf abc | dd of=pre bs=3 seek=1 conv=notrunc oflag=direct status=none 2>/dev/null; then echo unaligned ok; else echo unaligned refused; fi",
    );
    (out, std::fs::read(dir.join("pre")).expect("read pre"))
}

fn pre_image() -> Vec<u8> {
    (0..4 * BLOCK).map(|i| (i % 251) as u8).collect()
}

#[test]
fn direct_io_works_with_and_without_passthrough() {
    if !require_fuse() {
        return;
    }
    let plain = plain_dir();
    std::fs::write(plain.path().join("pre"), pre_image()).expect("write");
    let (ext4, ext4_pre) = dd_direct(plain.path());
    assert!(ext4.contains("unaligned refused"), "ext4: {ext4}");
    direct_io_exercise(&plain.path().join("fsx"), 2000, 7).expect("fsx odirect on ext4");
    for args in [&[][..], &["--no-passthrough"][..]] {
        let m = Mounted::with_args(
            |d| std::fs::write(d.join("pre"), pre_image()).expect("write"),
            args,
        );
        m.turn(2);
        let (out, got_pre) = dd_direct(&m.dir);
        if args.is_empty() {
            // The kernel does the caller's direct I/O on the host file: ext4's own rules.
            assert_eq!(out, ext4, "mount {args:?}");
            assert_eq!(got_pre, ext4_pre, "mount {args:?}");
        } else {
            // The daemon does the I/O, without O_DIRECT on the host: an unaligned write that
            // ext4 refuses goes through (the kernel checks no alignment for FUSE).
            assert_eq!(
                out.replace("unaligned ok", "unaligned refused"),
                ext4,
                "mount {args:?}"
            );
            assert_eq!(got_pre[BLOCK..], ext4_pre[BLOCK..], "mount {args:?}");
            assert_eq!(&got_pre[3..6], b"abc", "mount {args:?}");
        }
        direct_io_exercise(&m.path("fsx"), 2000, 7)
            .unwrap_or_else(|e| panic!("fsx odirect on the mount {args:?}: {e}"));
        // Captured before the direct writes: the rewind gives the file back.
        m.rewind(2);
        assert_eq!(std::fs::read(m.path("pre")).expect("read"), pre_image());
        assert!(!m.path("new").exists() && !m.path("fsx").exists());
    }
}

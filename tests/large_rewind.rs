//! A rewind large enough to be carried out in parts on several threads (saving what it
//! overwrites, verifying its blobs, restoring runs of independent files): through a real
//! mount, thousands of files rewritten longer and shorter, chmodded, given and stripped of
//! extended attributes, replaced by rename, by a directory, removed, a whole directory
//! recreated, a hard-link pair between them, files created. The rewind must give back exactly
//! the tree of the turn's start (bytes, modes, xattrs, hard links, and the inode of every file
//! rewritten in place), and its undo exactly the tree before it.

mod common;
use common::{Mounted, assert_same_tree, require_fuse, tree};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Directories of files, and files in each: 6,000 files at one depth, enough for the rewind
/// to split each of its stages on a machine with two cores or more.
const DIRS: usize = 6;
const FILES: usize = 1000;

fn name(d: usize, i: usize) -> String {
    format!("d{d:02}/f{i:04}")
}

/// Every path's user extended attributes (sorted "name=value"), for the paths that have any.
fn xattrs(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for path in tree(root, false).keys() {
        let full = root.join(path);
        let mut all: Vec<String> = xattr::list(&full)
            .expect("listxattr")
            .filter(|n| n.to_string_lossy().starts_with("user."))
            .map(|n| {
                let v = xattr::get(&full, &n).expect("getxattr").unwrap_or_default();
                format!("{}={}", n.to_string_lossy(), String::from_utf8_lossy(&v))
            })
            .collect();
        if !all.is_empty() {
            all.sort();
            out.insert(path.clone(), all);
        }
    }
    out
}

fn inodes(root: &Path) -> BTreeMap<String, u64> {
    tree(root, false)
        .keys()
        .map(|p| {
            let md = std::fs::symlink_metadata(root.join(p)).expect("lstat");
            (p.clone(), md.ino())
        })
        .collect()
}

fn setup(d: &Path) {
    for dd in 0..DIRS {
        std::fs::create_dir(d.join(format!("d{dd:02}"))).expect("mkdir");
        for i in 0..FILES {
            let p = d.join(name(dd, i));
            std::fs::write(&p, format!("original {dd}/{i}\n").repeat(i % 7 + 1)).expect("write");
            let mode = match i {
                _ if i % 11 == 0 => 0o600,
                _ if i % 13 == 0 => 0o755,
                _ => 0o644,
            };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            if i % 17 == 0 {
                xattr::set(&p, "user.tag", format!("orig-{i}").as_bytes()).expect("setxattr");
            }
        }
    }
    // A hard-link pair after the files of the last directory: a group between runs.
    let last = format!("d{:02}", DIRS - 1);
    std::fs::write(d.join(&last).join("hl-a"), "linked\n").expect("write");
    std::fs::hard_link(d.join(&last).join("hl-a"), d.join(&last).join("hl-b")).expect("link");
    std::fs::write(d.join("top.txt"), "top\n").expect("write");
}

/// What the agent does in the turn: every kind of change, to every file.
fn change_everything(m: &Mounted) {
    for dd in 0..DIRS - 1 {
        for i in 0..FILES {
            let p = m.path(&name(dd, i));
            match i % 5 {
                0 => std::fs::write(&p, format!("much longer now {i}\n").repeat(12)).expect("w"),
                1 => std::fs::write(&p, "x").expect("w"),
                2 => {
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))
                        .expect("chmod");
                    std::fs::write(&p, "chmodded and rewritten\n").expect("w");
                }
                3 => {
                    // An editor's save: a new file renamed over the old.
                    let tmp = m.path(&format!("{}.swp", name(dd, i)));
                    std::fs::write(&tmp, "saved by rename\n").expect("w");
                    std::fs::rename(&tmp, &p).expect("rename");
                }
                _ if i % 100 == 4 => {
                    std::fs::remove_file(&p).expect("rm");
                    std::fs::create_dir(&p).expect("mkdir");
                    std::fs::write(p.join("child"), "below a file's name").expect("w");
                }
                _ => std::fs::remove_file(&p).expect("rm"),
            }
            if p.is_file() && i % 17 == 0 {
                xattr::set(&p, "user.tag", b"changed").expect("setxattr");
            }
            if p.is_file() && i % 19 == 0 {
                xattr::set(&p, "user.new", b"added").expect("setxattr");
            }
        }
        for i in 0..40 {
            std::fs::write(m.path(&format!("d{dd:02}/new-{i}")), "created").expect("w");
        }
    }
    // The last directory removed whole and made again, with other files in it.
    let last = format!("d{:02}", DIRS - 1);
    std::fs::remove_dir_all(m.path(&last)).expect("rm -rf");
    std::fs::create_dir(m.path(&last)).expect("mkdir");
    std::fs::write(m.path(&format!("{last}/f0001")), "another file").expect("w");
    std::fs::write(m.path("top.txt"), "top, changed\n").expect("w");
}

#[test]
fn a_rewind_of_thousands_of_files_in_parts_is_exact_and_its_undo_too() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(setup);
    let start = tree(m.path("").as_path(), false);
    let start_xattrs = xattrs(&m.path(""));
    let start_inodes = inodes(&m.path(""));
    assert!(start.len() > DIRS * FILES);
    m.turn(2);
    change_everything(&m);
    let changed = tree(&m.path(""), false);
    let changed_xattrs = xattrs(&m.path(""));
    assert_ne!(changed, start);

    let out = m.rewind(2);
    assert_same_tree(&start, &tree(&m.path(""), false));
    assert_eq!(xattrs(&m.path("")), start_xattrs, "extended attributes");
    // Files rewritten in place (changed through their own inode) keep it; so does every path
    // the turn never touched.
    let now = inodes(&m.path(""));
    for dd in 0..DIRS - 1 {
        for i in (0..FILES).filter(|i| i % 5 < 3) {
            let p = name(dd, i);
            assert_eq!(now[&p], start_inodes[&p], "{p} was rewritten in place");
        }
        let dir = format!("d{dd:02}");
        assert_eq!(now[&dir], start_inodes[&dir], "{dir} untouched");
    }
    let last = format!("d{:02}", DIRS - 1);
    assert_eq!(
        std::fs::metadata(m.path(&format!("{last}/hl-a")))
            .expect("stat")
            .ino(),
        std::fs::metadata(m.path(&format!("{last}/hl-b")))
            .expect("stat")
            .ino(),
        "the hard-link pair is one inode again"
    );
    assert!(
        out.contains("restored") || out.contains("Restored"),
        "{out}"
    );

    let o = m.cli(&["rewind", "--undo"]);
    assert!(o.status.success(), "{}", common::output_text(&o));
    assert_same_tree(&changed, &tree(&m.path(""), false));
    assert_eq!(
        xattrs(&m.path("")),
        changed_xattrs,
        "extended attributes after the undo"
    );
    // The daemon's log, in the folder once it is unmounted.
    m.unmount();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let log = std::fs::read_to_string(m.path(".ckpt/daemon.log")).expect("daemon log");
        assert!(
            log.contains("files in 2 parts")
                || log.contains("files in 3 parts")
                || log.contains("files in 4 parts"),
            "the files were restored in parts on this multi-core machine: {}",
            log.lines()
                .filter(|l| l.contains("ckpt::rewind"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

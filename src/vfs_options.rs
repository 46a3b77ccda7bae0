//! `mount -o`: the usual VFS mount options (`ro`, `noatime`, `noexec` …) as `mount(8)` and
//! `mount.fuse3` take them, and FUSE's own `allow_other` and `default_permissions`. A pure
//! rule: which words a ckpt-mount mount accepts, the `MS_*` flags root's `mount(2)` gets, and
//! the words `fusermount3` gets for a user's mount (it reads the same words into the same
//! flags).
//!
//! `suid` and `dev` are refused: a ckpt-mount mount is always `nosuid,nodev` (its daemon acts
//! for every process in the folder, and a set-uid file or a device node there is the host
//! folder's business, not the mount's).

/// A mount flag word: the `MS_*` flag it sets (`set`) or clears.
struct Flag {
    word: &'static str,
    flag: libc::c_ulong,
    set: bool,
}

const fn on(word: &'static str, flag: libc::c_ulong) -> Flag {
    Flag {
        word,
        flag,
        set: true,
    }
}

const fn off(word: &'static str, flag: libc::c_ulong) -> Flag {
    Flag {
        word,
        flag,
        set: false,
    }
}

/// Every flag word accepted, as `mount(8)` documents them.
const FLAGS: &[Flag] = &[
    on("ro", libc::MS_RDONLY),
    off("rw", libc::MS_RDONLY),
    on("noexec", libc::MS_NOEXEC),
    off("exec", libc::MS_NOEXEC),
    on("nosuid", libc::MS_NOSUID),
    on("nodev", libc::MS_NODEV),
    on("sync", libc::MS_SYNCHRONOUS),
    off("async", libc::MS_SYNCHRONOUS),
    on("dirsync", libc::MS_DIRSYNC),
    on("noatime", libc::MS_NOATIME),
    off("atime", libc::MS_NOATIME),
    on("nodiratime", libc::MS_NODIRATIME),
    off("diratime", libc::MS_NODIRATIME),
    on("relatime", libc::MS_RELATIME),
    off("norelatime", libc::MS_RELATIME),
    on("strictatime", libc::MS_STRICTATIME),
    off("nostrictatime", libc::MS_STRICTATIME),
    on("lazytime", libc::MS_LAZYTIME),
    off("nolazytime", libc::MS_LAZYTIME),
    on("nosymfollow", libc::MS_NOSYMFOLLOW),
    off("symfollow", libc::MS_NOSYMFOLLOW),
];

/// The flags every ckpt-mount mount has, whatever `-o` says.
pub const ALWAYS: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV;

/// What `-o` asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VfsOptions {
    /// The flag words, in the order given (a later word overrides an earlier one).
    words: Vec<&'static str>,
    /// `allow_other`: the same as `--allow-other`.
    pub allow_other: bool,
    /// `default_permissions`: the same as `--kernel-permissions`.
    pub default_permissions: bool,
}

/// The list a refusal names.
fn supported() -> String {
    let mut words: Vec<&str> = FLAGS.iter().map(|f| f.word).collect();
    words.extend(["allow_other", "default_permissions"]);
    words.join(", ")
}

impl VfsOptions {
    /// Reads `-o` lists (each comma-separated, as `mount -o` takes them; empty items are
    /// skipped). A word it does not accept is refused with a message naming it.
    pub fn parse<S: AsRef<str>>(lists: &[S]) -> Result<Self, String> {
        let mut out = Self::default();
        for word in lists.iter().flat_map(|l| l.as_ref().split(',')) {
            match word {
                "" => {}
                "allow_other" => out.allow_other = true,
                "default_permissions" => out.default_permissions = true,
                "suid" | "dev" => {
                    return Err(format!(
                        "mount option '{word}' is not supported: a ckpt-mount mount is always nosuid,nodev"
                    ));
                }
                _ => match FLAGS.iter().find(|f| f.word == word) {
                    Some(f) => out.words.push(f.word),
                    None => {
                        return Err(format!(
                            "mount option '{word}' is not supported (supported: {})",
                            supported()
                        ));
                    }
                },
            }
        }
        Ok(out)
    }

    /// The `MS_*` flags for `mount(2)`: [`ALWAYS`], then each word in order.
    pub fn flags(&self) -> libc::c_ulong {
        self.words.iter().fold(ALWAYS, |acc, word| {
            match FLAGS.iter().find(|f| f.word == *word) {
                Some(f) if f.set => acc | f.flag,
                Some(f) => acc & !f.flag,
                None => acc,
            }
        })
    }

    /// Whether the mount is read-only (`ro`, not overridden by a later `rw`).
    pub fn read_only(&self) -> bool {
        self.flags() & libc::MS_RDONLY != 0
    }

    /// The words `fusermount3` is given: one per flag the options set, beyond [`ALWAYS`]
    /// (`-o ro,rw,noatime` gives `noatime`). It starts from the same flags and reads these
    /// words into them, and an older one knows only some words (3.14 refuses `relatime`):
    /// `relatime`, which a new mount has by default (only `noatime` and `strictatime` change
    /// it), is never given.
    pub fn helper_words(&self) -> Vec<&'static str> {
        let flags = self.flags();
        FLAGS
            .iter()
            .filter(|f| f.set && f.flag & (ALWAYS | libc::MS_RELATIME) == 0 && flags & f.flag != 0)
            .map(|f| f.word)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_into_flags_in_order() {
        let o = VfsOptions::parse(&["noatime,ro", "relatime,nodiratime"]).expect("parse");
        assert_eq!(o.helper_words(), ["ro", "noatime", "nodiratime"]);
        assert_eq!(
            o.flags(),
            ALWAYS | libc::MS_RDONLY | libc::MS_NOATIME | libc::MS_RELATIME | libc::MS_NODIRATIME
        );
        assert!(o.read_only());
        // A later word overrides an earlier one, as with mount(8).
        let o = VfsOptions::parse(&["ro,noexec,rw,exec"]).expect("parse");
        assert!(!o.read_only());
        assert_eq!(o.flags(), ALWAYS);
        assert!(o.helper_words().is_empty());
        // nosuid and nodev change nothing: they are always on.
        assert_eq!(
            VfsOptions::parse(&["nosuid,nodev,,"])
                .expect("parse")
                .flags(),
            ALWAYS
        );
        assert_eq!(
            VfsOptions::parse::<&str>(&[]).expect("parse").flags(),
            ALWAYS
        );
    }

    #[test]
    fn fuse_words_set_their_switches() {
        let o = VfsOptions::parse(&["allow_other,default_permissions,sync"]).expect("parse");
        assert!(o.allow_other && o.default_permissions);
        assert_eq!(o.helper_words(), ["sync"]);
        assert_eq!(o.flags(), ALWAYS | libc::MS_SYNCHRONOUS);
    }

    #[test]
    fn unsupported_words_are_refused_by_name() {
        let e = VfsOptions::parse(&["ro,suid"]).expect_err("suid");
        assert_eq!(
            e,
            "mount option 'suid' is not supported: a ckpt-mount mount is always nosuid,nodev"
        );
        let e = VfsOptions::parse(&["fsname=x"]).expect_err("fsname");
        assert!(
            e.starts_with("mount option 'fsname=x' is not supported (supported: ro, rw, noexec"),
            "{e}"
        );
        assert!(e.ends_with("allow_other, default_permissions)"), "{e}");
    }
}

//! The shell tier's steps (`tests/shell_turns.rs`): shell commands drawn by a splitmix64
//! generator against the work tree as it is before each one, and steps of the test process
//! (files it holds or reads, waits for the stager). A seed draws the same commands as before
//! the tiers shared this module.

use super::super::ops::Op::{self, *};
use crate::common::paths::{file_name, intern, join, parent};
use crate::common::rng::Rng;

/// The work tree (no `.git`) as a generator sees it before each command.
#[derive(Default)]
pub struct Listing {
    pub files: Vec<String>,
    pub dirs: Vec<String>,
    pub symlinks: Vec<String>,
    /// Paths with `user.*` xattrs, and their names.
    pub xattrs: Vec<(String, String)>,
    /// Regular files with more than one name.
    pub linked: Vec<String>,
    pub git: bool,
}

pub const DIR_POOL: [&str; 6] = ["src", "src/util", "docs", "vendor/pkg", "build", "tmp"];
pub const NAME_POOL: [&str; 7] = [
    "a.txt", "b.txt", "main.rs", "lib.rs", "notes.md", "x.log", "data.bin",
];
pub const WORDS: [&str; 6] = ["alpha", "beta", "gamma", "delta", "omega", "zeta"];
pub const FILE_MODES: [&str; 6] = ["600", "644", "640", "755", "444", "700"];
pub const DIR_MODES: [&str; 4] = ["755", "700", "750", "775"];

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum K {
    WriteNew,
    Overwrite,
    Append,
    Sed,
    Save,
    Ln,
    LnF,
    Symlink,
    Rm,
    RmRf,
    MvDir,
    MvFile,
    Chmod,
    MkdirP,
    Ignored,
    SetXattr,
    RmXattr,
    Tar,
    Chown,
    GitInit,
    GitCommit,
    GitStash,
    GitStashPop,
    GitCheckout,
    GitCheckoutFile,
    GitBranch,
    GitClean,
    GitResetSoft,
    GitResetHard,
    GitGc,
    CpAl,
    GitCheckoutLinked,
    Hold,
    HeldWrite,
    Release,
    Read,
    Settle,
}

pub const WEIGHTS: [(K, u32); 37] = [
    (K::WriteNew, 7),
    (K::Overwrite, 3),
    (K::Append, 6),
    (K::Sed, 6),
    (K::Save, 5),
    (K::Ln, 7),
    (K::LnF, 2),
    (K::Symlink, 3),
    (K::Rm, 5),
    (K::RmRf, 3),
    (K::MvDir, 3),
    (K::MvFile, 4),
    (K::Chmod, 4),
    (K::MkdirP, 2),
    (K::Ignored, 3),
    (K::SetXattr, 3),
    (K::RmXattr, 2),
    (K::Tar, 2),
    (K::Chown, 1),
    (K::GitInit, 12),
    (K::GitCommit, 5),
    (K::GitStash, 2),
    (K::GitStashPop, 2),
    (K::GitCheckout, 3),
    (K::GitCheckoutFile, 2),
    (K::GitBranch, 1),
    (K::GitClean, 2),
    (K::GitResetSoft, 2),
    (K::GitResetHard, 1),
    (K::GitGc, 1),
    (K::CpAl, 2),
    (K::GitCheckoutLinked, 2),
    (K::Hold, 2),
    (K::HeldWrite, 5),
    (K::Release, 1),
    (K::Read, 1),
    (K::Settle, 2),
];

/// What the generator remembers between commands of a case.
pub struct Gen {
    pub rng: Rng,
    /// Counter for unique contents and names.
    pub n: u64,
    /// Paths named by recent commands, so that later ones meet them again (a hard link, then
    /// an append, then `sed -i`, then a removal: the shapes that break hard-link anchors).
    pub recent: Vec<String>,
    pub branches: Vec<String>,
    pub held: usize,
    pub readers: usize,
}

impl Gen {
    pub fn text(&mut self) -> String {
        self.n += 1;
        format!("{} {}", self.rng.pick(&WORDS), self.n)
    }

    pub fn remember(&mut self, p: &str) {
        self.recent.push(p.to_string());
        if self.recent.len() > 6 {
            self.recent.remove(0);
        }
    }

    /// An existing regular file, often one a recent command named.
    pub fn file(&mut self, l: &Listing) -> String {
        let recent: Vec<&String> = self.recent.iter().filter(|p| l.files.contains(p)).collect();
        let f = if !recent.is_empty() && self.rng.chance(1, 2) {
            (*self.rng.pick(&recent)).clone()
        } else {
            self.rng.pick(&l.files).clone()
        };
        self.remember(&f);
        f
    }

    /// An existing directory, or "" (the root) when there is none.
    pub fn dir(&mut self, l: &Listing) -> String {
        if l.dirs.is_empty() || self.rng.chance(1, 4) {
            String::new()
        } else {
            self.rng.pick(&l.dirs).clone()
        }
    }

    /// A fresh name in an existing directory.
    pub fn new_name(&mut self, l: &Listing) -> String {
        let d = self.dir(l);
        self.n += 1;
        let p = join(&d, &format!("n{}-{}", self.n, self.rng.pick(&NAME_POOL)));
        self.remember(&p);
        p
    }

    pub fn applicable(&self, k: K, l: &Listing) -> bool {
        let files = !l.files.is_empty();
        match k {
            K::Overwrite | K::Append | K::Sed | K::Save | K::Ln | K::Rm | K::MvFile => files,
            K::Read => files && self.readers < 2,
            K::LnF => l.files.len() >= 2,
            K::RmRf | K::MvDir => !l.dirs.is_empty(),
            K::Chmod | K::SetXattr | K::Chown => files || !l.dirs.is_empty(),
            K::RmXattr => !l.xattrs.is_empty(),
            K::GitInit => !l.git,
            K::GitCommit
            | K::GitStash
            | K::GitStashPop
            | K::GitCheckout
            | K::GitBranch
            | K::GitClean
            | K::GitResetSoft
            | K::GitResetHard
            | K::GitGc => l.git,
            K::GitCheckoutFile => l.git && files,
            K::CpAl => !l.dirs.is_empty(),
            K::GitCheckoutLinked => l.git && !l.linked.is_empty(),
            K::Hold => self.held < 2,
            K::HeldWrite | K::Release => self.held > 0,
            K::WriteNew | K::Symlink | K::MkdirP | K::Ignored | K::Tar | K::Settle => true,
        }
    }

    /// The next command, drawn against the tree as it is now.
    pub fn step(&mut self, l: &Listing) -> Op {
        let choices: Vec<(K, u32)> = WEIGHTS
            .iter()
            .copied()
            .filter(|(k, _)| self.applicable(*k, l))
            .collect();
        let total: u32 = choices.iter().map(|c| c.1).sum();
        let mut r = self.rng.index(total as usize) as u32;
        let mut k = choices[0].0;
        for (c, w) in &choices {
            if r < *w {
                k = *c;
                break;
            }
            r -= w;
        }
        self.build(k, l)
    }

    fn build(&mut self, k: K, l: &Listing) -> Op {
        let s = match k {
            K::WriteNew | K::Overwrite | K::Append | K::Sed | K::Save => self.build_file(k, l),
            K::Ln | K::LnF | K::Symlink | K::CpAl | K::GitCheckoutLinked => self.build_link(k, l),
            K::Rm
            | K::RmRf
            | K::MvDir
            | K::MvFile
            | K::Chmod
            | K::MkdirP
            | K::Ignored
            | K::SetXattr
            | K::RmXattr
            | K::Tar
            | K::Chown => self.build_tree(k, l),
            K::GitInit
            | K::GitCommit
            | K::GitStash
            | K::GitStashPop
            | K::GitCheckout
            | K::GitCheckoutFile
            | K::GitBranch
            | K::GitClean
            | K::GitResetSoft
            | K::GitResetHard
            | K::GitGc => self.build_git(k, l),
            K::Hold | K::HeldWrite | K::Release | K::Read | K::Settle => {
                return self.build_process(k, l);
            }
        };
        Sh(intern(&s))
    }

    /// A command that writes a file: new, overwritten, appended, edited, saved.
    fn build_file(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::WriteNew => {
                let t = self.text();
                if self.rng.chance(1, 3) {
                    let d = self.rng.pick(&DIR_POOL).to_string();
                    let p = join(&d, NAME_POOL[self.rng.index(NAME_POOL.len())]);
                    self.remember(&p);
                    format!("mkdir -p {d} && printf '%s\\n' '{t}' > {p}")
                } else {
                    let p = self.new_name(l);
                    format!("printf '%s\\n' '{t}' > {p}")
                }
            }
            K::Overwrite => {
                let (f, t) = (self.file(l), self.text());
                format!("printf '%s\\n' '{t}' > {f}")
            }
            K::Append => {
                let (f, t) = (self.file(l), self.text());
                format!("printf '%s\\n' '{t}' >> {f}")
            }
            K::Sed => {
                let (f, t) = (self.file(l), self.text());
                match self.rng.index(4) {
                    0 => format!("sed -i 's/a/A/g' {f}"),
                    1 => format!("sed -i '1i {t}' {f}"),
                    2 => format!("sed -i '$d' {f}"),
                    _ => format!("sed -i 's/$/ {t}/' {f}"),
                }
            }
            K::Save => {
                let (f, t) = (self.file(l), self.text());
                let tmp = join(parent(&f), &format!(".{}.swp", file_name(&f)));
                match self.rng.index(3) {
                    // A fresh temp file renamed over the original (its mode is the umask's).
                    0 => format!("printf '%s\\n' '{t}' > {tmp} && mv -f {tmp} {f}"),
                    // As editors that keep the mode.
                    1 => format!(
                        "printf '%s\\n' '{t}' > {tmp} && chmod --reference={f} {tmp} && mv -f {tmp} {f}"
                    ),
                    // vim's backup by rename: the original moved aside, a new file written.
                    _ => format!("mv {f} {f}~ && printf '%s\\n' '{t}' > {f} && rm {f}~"),
                }
            }
            _ => unreachable!("another group"),
        }
    }

    /// A command that makes a hard link or a symlink.
    fn build_link(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::Ln => {
                let f = self.file(l);
                let new = if self.rng.chance(1, 2) {
                    let p = format!("{f}.{}", self.rng.pick(&["hard", "ln", "2"]));
                    self.remember(&p);
                    p
                } else {
                    self.new_name(l)
                };
                format!("ln {f} {new}")
            }
            K::LnF => {
                let a = self.file(l);
                let others: Vec<&String> = l.files.iter().filter(|f| **f != a).collect();
                let b = (*self.rng.pick(&others)).clone();
                self.remember(&b);
                format!("ln -f {a} {b}")
            }
            K::Symlink => {
                let target = if !l.files.is_empty() && self.rng.chance(2, 3) {
                    file_name(self.rng.pick::<String>(&l.files)).to_string()
                } else {
                    self.rng
                        .pick(&["../a.txt", "src", "missing", "."])
                        .to_string()
                };
                if !l.symlinks.is_empty() && self.rng.chance(1, 3) {
                    let s = self.rng.pick(&l.symlinks).clone();
                    format!("ln -sfn {target} {s}")
                } else {
                    let p = self.new_name(l);
                    format!("ln -s {target} {p}")
                }
            }
            K::CpAl => {
                // A hard-link tree, as `cp -al` (or a package manager's store) makes one.
                let d = self.rng.pick(&l.dirs).clone();
                self.n += 1;
                let to = format!("{}-links{}", d.replace('/', "-"), self.n);
                self.remember(&to);
                format!("cp -al {d} {to}")
            }
            K::GitCheckoutLinked => {
                // git restores one name of a hard-link group (a new file): the group splits.
                let f = self.rng.pick(&l.linked).clone();
                self.remember(&f);
                let t = self.text();
                format!("printf '%s\\n' '{t}' >> {f} && git checkout -q -- {f}")
            }
            _ => unreachable!("another group"),
        }
    }

    /// A command that removes, moves or makes entries, or changes their modes, owners or xattrs.
    fn build_tree(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::Chmod | K::SetXattr | K::RmXattr | K::Chown => self.build_attrs(k, l),
            _ => self.build_moves(k, l),
        }
    }

    /// A command that removes, moves or makes entries.
    fn build_moves(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::Rm => {
                if !l.symlinks.is_empty() && self.rng.chance(1, 5) {
                    format!("rm {}", self.rng.pick(&l.symlinks))
                } else {
                    format!("rm -f {}", self.file(l))
                }
            }
            K::RmRf => format!("rm -rf {}", self.rng.pick(&l.dirs)),
            K::MvDir => {
                let d = self.rng.pick(&l.dirs).clone();
                let into: Vec<&String> = l
                    .dirs
                    .iter()
                    .filter(|o| **o != d && !o.starts_with(&format!("{d}/")) && **o != parent(&d))
                    .collect();
                if !into.is_empty() && self.rng.chance(1, 2) {
                    let o = self.rng.pick(&into);
                    self.remember(&join(o, file_name(&d)));
                    format!("mv {d} {o}/")
                } else {
                    self.n += 1;
                    let p = format!("moved{}", self.n);
                    self.remember(&p);
                    format!("mv {d} {p}")
                }
            }
            K::MvFile => {
                let f = self.file(l);
                if l.files.len() >= 2 && self.rng.chance(1, 2) {
                    let others: Vec<&String> = l.files.iter().filter(|o| **o != f).collect();
                    let o = (*self.rng.pick(&others)).clone();
                    self.remember(&o);
                    format!("mv -f {f} {o}")
                } else {
                    let p = self.new_name(l);
                    format!("mv {f} {p}")
                }
            }
            K::MkdirP => {
                self.n += 1;
                let d = join(
                    DIR_POOL[self.rng.index(DIR_POOL.len())],
                    &format!("deep{}/er", self.n),
                );
                format!("mkdir -p {d}")
            }
            K::Ignored => {
                let t = self.text();
                if self.rng.chance(1, 2) {
                    self.n += 1;
                    format!(
                        "mkdir -p build/obj && printf '%s\\n' '{t}' > build/obj/o{}.o",
                        self.n
                    )
                } else {
                    let d = self.dir(l);
                    let p = join(&d, &format!("debug{}.log", self.rng.index(3)));
                    self.remember(&p);
                    format!("printf '%s\\n' '{t}' >> {p}")
                }
            }
            K::Tar => {
                if l.dirs.is_empty() || self.rng.chance(1, 2) {
                    "tar xf ~/t.tar".to_string()
                } else {
                    format!("tar xf ~/t.tar -C {}", self.rng.pick(&l.dirs))
                }
            }
            _ => unreachable!("another group"),
        }
    }

    /// A command that changes modes, owners or xattrs.
    fn build_attrs(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::Chmod => {
                if l.files.is_empty() || (!l.dirs.is_empty() && self.rng.chance(1, 3)) {
                    let d = self.rng.pick(&l.dirs).clone();
                    format!("chmod {} {d}", self.rng.pick(&DIR_MODES))
                } else {
                    let f = self.file(l);
                    format!("chmod {} {f}", self.rng.pick(&FILE_MODES))
                }
            }
            K::SetXattr => {
                let p = if l.files.is_empty() || (!l.dirs.is_empty() && self.rng.chance(1, 4)) {
                    self.rng.pick(&l.dirs).clone()
                } else {
                    self.file(l)
                };
                let name = self.rng.pick(&["x", "y", "note"]);
                self.n += 1;
                format!("setfattr -n user.{name} -v v{} {p}", self.n)
            }
            K::RmXattr => {
                let (p, name) = self.rng.pick(&l.xattrs).clone();
                format!("setfattr -x {name} {p}")
            }
            K::Chown => {
                let p = if l.files.is_empty() {
                    self.rng.pick(&l.dirs).clone()
                } else {
                    self.file(l)
                };
                format!(
                    "chown {} {p}",
                    self.rng.pick(&["1000:1000", "0:100", "0:0"])
                )
            }
            _ => unreachable!("another group"),
        }
    }

    /// A git command.
    fn build_git(&mut self, k: K, l: &Listing) -> String {
        match k {
            K::GitInit => "git init -q -b main . && git config gc.auto 0 \
                 && git config maintenance.auto false && git add -A && git commit -qm init"
                .to_string(),
            K::GitCommit => {
                self.n += 1;
                if self.rng.chance(1, 3) {
                    format!("git commit -qam c{}", self.n)
                } else {
                    format!("git add -A && git commit -qm c{}", self.n)
                }
            }
            K::GitStash => "git stash -u -q".to_string(),
            K::GitStashPop => "git stash pop -q".to_string(),
            K::GitCheckout => {
                let mut bs = vec!["main".to_string(), "feature".to_string()];
                bs.extend(self.branches.iter().cloned());
                let b = self.rng.pick(&bs).clone();
                if self.rng.chance(1, 3) {
                    format!("git checkout -qf {b}")
                } else {
                    format!("git checkout -q {b}")
                }
            }
            K::GitCheckoutFile => format!("git checkout -q -- {}", self.file(l)),
            K::GitBranch => {
                self.n += 1;
                let b = format!("topic{}", self.n);
                self.branches.push(b.clone());
                format!("git checkout -qb {b}")
            }
            K::GitClean => {
                if self.rng.chance(1, 3) {
                    "git clean -fdxq".to_string()
                } else {
                    "git clean -fdq".to_string()
                }
            }
            K::GitResetSoft => "git reset -q --soft HEAD~1".to_string(),
            K::GitResetHard => "git reset -q --hard".to_string(),
            K::GitGc => "git gc -q".to_string(),
            _ => unreachable!("another group"),
        }
    }

    /// A step of the test process: a file it holds or reads, or a wait for the stager.
    fn build_process(&mut self, k: K, l: &Listing) -> Op {
        match k {
            K::Hold => {
                let p = if !l.files.is_empty() && self.rng.chance(2, 3) {
                    self.file(l)
                } else {
                    self.n += 1;
                    format!("held{}.log", self.n)
                };
                self.held += 1;
                Hold(intern(&p))
            }
            K::HeldWrite => {
                let i = self.rng.index(self.held);
                let t = self.text();
                WriteLine(i as u8, intern(&t))
            }
            K::Release => {
                self.held -= 1;
                CloseHeld(self.rng.index(self.held + 1) as u8)
            }
            K::Read => {
                self.readers += 1;
                Read(intern(&self.file(l)))
            }
            K::Settle => Settle,
            _ => unreachable!("another group"),
        }
    }
}

//! An fsx-style exerciser through the mount: one file, random operations (pwrite, pread,
//! truncate up and down, mmap reads and writes, fsync, close and reopen, O_APPEND writes),
//! each checked against an in-memory model. A new turn begins every ~10k operations (every
//! tenth of them when fewer) with a copy of the model saved; halfway, a rewind with the file
//! held open must give back exactly the copy of its turn (through the open descriptor too) and
//! work goes on from there; at the end a rewind to a random earlier turn must give back
//! exactly that copy.
//!
//! `CKPT_FSX_OPS` sets the number of operations (default 100,000), `CKPT_FSX_SEED` the seed
//! (printed with every failure, so a failing run can be replayed).

mod common;
use common::rng::Rng;
use common::{Mounted, env_u64, require_fuse};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

const MAX_LEN: u64 = 256 * 1024;
const MAX_IO: u64 = 64 * 1024;
const DEFAULT_SEED: u64 = 0x0f5c_2026_c4e1_7001;

/// A shared mapping of the whole file, unmapped on drop.
struct Map {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Map {
    fn new(file: &File, len: usize, writable: bool) -> std::io::Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh mapping of `len > 0` bytes of an open file; the kernel picks the
        // address, and the mapping is only used through `bytes`/`bytes_mut` within `len`.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for the lifetime of `self`, and the file is
        // never shrunk below `len` while a mapping exists (each op maps and unmaps).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and the mapping was made writable by its only caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
    }

    fn msync(&self) -> std::io::Result<()> {
        // SAFETY: syncs exactly the range mapped by `self`.
        if unsafe { libc::msync(self.ptr, self.len, libc::MS_SYNC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

struct Fsx {
    seed: u64,
    rng: Rng,
    path: PathBuf,
    file: File,
    model: Vec<u8>,
    op: u64,
    log: VecDeque<String>,
}

impl Fsx {
    fn fail(&self, what: &str) -> ! {
        let recent: Vec<&str> = self.log.iter().map(String::as_str).collect();
        panic!(
            "fsx failed at op {} (seed {:#x}; replay with CKPT_FSX_SEED={:#x}): {what}\nfile length in the model: {}\nlast operations:\n  {}",
            self.op,
            self.seed,
            self.seed,
            self.model.len(),
            recent.join("\n  ")
        );
    }

    fn note(&mut self, s: String) {
        if self.log.len() == 40 {
            self.log.pop_front();
        }
        self.log.push_back(format!("#{} {s}", self.op));
    }

    fn io<T>(&self, what: &str, r: std::io::Result<T>) -> T {
        r.unwrap_or_else(|e| self.fail(&format!("{what}: {e}")))
    }

    fn open(&self) -> File {
        self.io(
            "open",
            OpenOptions::new().read(true).write(true).open(&self.path),
        )
    }

    /// Compares `got`, read at `off`, with the model.
    fn same(&self, what: &str, off: u64, got: &[u8]) {
        let start = (off as usize).min(self.model.len());
        let end = (off as usize + got.len()).min(self.model.len());
        let want = &self.model[start..end];
        if got.len() != want.len() {
            self.fail(&format!(
                "{what}: {} bytes at {off}, the model has {}",
                got.len(),
                want.len()
            ));
        }
        if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
            self.fail(&format!(
                "{what}: byte {} differs: {:#04x}, the model has {:#04x}",
                off as usize + i,
                got[i],
                want[i]
            ));
        }
    }

    fn read_back(&self, what: &str, off: u64, len: u64) {
        let mut buf = vec![0u8; len as usize];
        let mut got = 0;
        while got < buf.len() {
            let n = self.io(
                "pread",
                self.file.read_at(&mut buf[got..], off + got as u64),
            );
            if n == 0 {
                break;
            }
            got += n;
        }
        buf.truncate(got);
        self.same(what, off, &buf);
    }

    /// After every operation: the size, the range it touched and a random window.
    fn check(&mut self, touched: (u64, u64)) {
        let size = self.io("fstat", self.file.metadata()).len();
        if size != self.model.len() as u64 {
            self.fail(&format!(
                "fstat size {size}, the model has {}",
                self.model.len()
            ));
        }
        let (off, len) = touched;
        self.read_back("read-back of the range touched", off, len.min(MAX_IO));
        let woff = self.rng.below(self.model.len() as u64 + 1);
        let wlen = self.rng.below(4096) + 1;
        self.read_back("read-back of a random window", woff, wlen);
        if self.op.is_multiple_of(1000) {
            self.read_back("read-back of the whole file", 0, MAX_LEN + 1);
        }
    }

    fn extend_model(&mut self, to: usize) {
        if self.model.len() < to {
            self.model.resize(to, 0);
        }
    }

    fn step(&mut self) {
        let len_now = self.model.len() as u64;
        let touched = match self.rng.below(100) {
            0..=24 => {
                let off = self.rng.below(MAX_LEN);
                let len = (self.rng.below(MAX_IO) + 1).min(MAX_LEN - off);
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                self.note(format!("pwrite off={off} len={len}"));
                self.io("pwrite", self.file.write_all_at(&data, off));
                self.extend_model((off + len) as usize);
                self.model[off as usize..(off + len) as usize].copy_from_slice(&data);
                (off, len)
            }
            25..=44 => {
                let off = self.rng.below(len_now + 4096);
                let len = self.rng.below(MAX_IO) + 1;
                self.note(format!("pread off={off} len={len}"));
                self.read_back("pread", off, len);
                (off, len)
            }
            45..=54 => {
                let size = if self.rng.below(2) == 0 {
                    self.rng.below(len_now + 1)
                } else {
                    len_now + self.rng.below(MAX_LEN - len_now + 1)
                };
                self.note(format!("truncate {len_now} -> {size}"));
                self.io("ftruncate", self.file.set_len(size));
                self.model.resize(size as usize, 0);
                let from = size.min(len_now).saturating_sub(16);
                (from, 4096)
            }
            55..=64 => {
                if len_now == 0 {
                    self.note("mapread on an empty file: skipped".into());
                    return self.check((0, 0));
                }
                let off = self.rng.below(len_now);
                let len = (self.rng.below(MAX_IO) + 1).min(len_now - off);
                self.note(format!("mapread off={off} len={len}"));
                let map = self.io("mmap", Map::new(&self.file, len_now as usize, false));
                let got = map.bytes()[off as usize..(off + len) as usize].to_vec();
                drop(map);
                self.same("mapread", off, &got);
                (off, len)
            }
            65..=76 => {
                let off = self.rng.below(MAX_LEN);
                let len = (self.rng.below(MAX_IO) + 1).min(MAX_LEN - off);
                let end = off + len;
                if end > len_now {
                    // A mapping cannot grow a file: extend it first, as fsx does.
                    self.note(format!("mapwrite extends {len_now} -> {end}"));
                    self.io("ftruncate", self.file.set_len(end));
                    self.extend_model(end as usize);
                }
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                let sync = self.rng.below(2) == 0;
                self.note(format!("mapwrite off={off} len={len} msync={sync}"));
                let size = self.model.len();
                let mut map = self.io("mmap", Map::new(&self.file, size, true));
                map.bytes_mut()[off as usize..end as usize].copy_from_slice(&data);
                if sync {
                    self.io("msync", map.msync());
                }
                drop(map);
                self.model[off as usize..end as usize].copy_from_slice(&data);
                (off, len)
            }
            77..=82 => {
                let data_only = self.rng.below(2) == 0;
                self.note(format!("fsync data_only={data_only}"));
                if data_only {
                    self.io("fdatasync", self.file.sync_data());
                } else {
                    self.io("fsync", self.file.sync_all());
                }
                (0, 0)
            }
            83..=89 => {
                self.note("close and reopen".into());
                let f = self.open();
                self.file = f;
                (0, 0)
            }
            _ => {
                let len = (self.rng.below(MAX_IO / 4) + 1).min(MAX_LEN - len_now);
                if len == 0 {
                    self.note("append to a full file: skipped".into());
                    return self.check((0, 0));
                }
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                self.note(format!("O_APPEND write at {len_now} len={len}"));
                let mut a = self.io(
                    "open O_APPEND",
                    OpenOptions::new().append(true).open(&self.path),
                );
                self.io("append", a.write_all(&data));
                drop(a);
                self.model.extend_from_slice(&data);
                (len_now, len)
            }
        };
        self.check(touched);
    }
}

#[test]
fn random_operations_match_the_model_and_rewind_to_a_turn_start_exactly() {
    if !require_fuse() {
        return;
    }
    run(&[], env_u64("CKPT_FSX_OPS").unwrap_or(100_000));
}

#[test]
fn the_same_without_kernel_passthrough() {
    if !require_fuse() {
        return;
    }
    // Every read, write and mapped page goes through the daemon: a fifth of the operations.
    run(
        &["--no-passthrough"],
        env_u64("CKPT_FSX_OPS").unwrap_or(100_000) / 5,
    );
}

fn run(mount_args: &[&str], ops: u64) {
    let seed = env_u64("CKPT_FSX_SEED").unwrap_or(DEFAULT_SEED);
    eprintln!("fsx {mount_args:?}: {ops} operations, seed {seed:#x}");
    let m = Mounted::with_args(|_| {}, mount_args);
    let path = m.path("fsx.dat");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .expect("create the fsx file");
    let mut fsx = Fsx {
        seed,
        rng: Rng(seed),
        path: path.clone(),
        file,
        model: Vec::new(),
        op: 0,
        log: VecDeque::new(),
    };
    // The file did not exist when turn 1 began.
    // About ten turns: every 10k operations by default.
    let turn_every = (ops / 10).clamp(1000, 10_000);
    let mut starts: Vec<(u64, Option<Vec<u8>>)> = vec![(1, None)];
    let mut turn = 1;
    for op in 1..=ops {
        fsx.op = op;
        if op.is_multiple_of(turn_every) {
            turn += 1;
            fsx.note(format!("turn {turn} begins (the file is held open)"));
            m.turn(turn);
            starts.push((turn, Some(fsx.model.clone())));
        }
        if op == ops / 2 && starts.len() > 2 {
            // Halfway: rewind (to a turn after the first, where the file existed) while the
            // file is held open. It is rewritten in place, so the open descriptor sees the
            // restored bytes, and work goes on from there in the turn rewound to.
            let i = 1 + fsx.rng.below(starts.len() as u64 - 1) as usize;
            let t = starts[i].0;
            fsx.note(format!("rewind to turn {t} with the file held open"));
            eprintln!("fsx: op {op}: rewinding to the start of turn {t} with the file open");
            m.rewind(t);
            fsx.model = starts[i].1.clone().expect("the file existed");
            starts.truncate(i + 1);
            fsx.read_back(
                "read through the open descriptor after a rewind",
                0,
                MAX_LEN + 1,
            );
            fsx.check((0, MAX_LEN));
            let fresh = std::fs::read(&path).expect("read after the rewind");
            fsx.same("read by path after a rewind", 0, &fresh);
            if fresh.len() != fsx.model.len() {
                fsx.fail("length after the rewind");
            }
        }
        fsx.step();
    }
    fsx.read_back("final read of the whole file", 0, MAX_LEN + 1);
    let Fsx { file, mut rng, .. } = fsx;
    drop(file);
    eprintln!("fsx: {ops} operations checked, {turn} turns");

    // Rewind to a random turn, then to a random earlier one (if any): each exact.
    let mut upto = starts.len();
    for _ in 0..2 {
        if upto == 0 {
            break;
        }
        let i = rng.below(upto as u64) as usize;
        let (t, want) = &starts[i];
        eprintln!("fsx: rewinding to the start of turn {t}");
        m.rewind(*t);
        let got = match std::fs::read(&path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("read after rewind: {e}"),
        };
        match (want, &got) {
            (None, None) => {}
            (Some(w), Some(g)) if w == g => {}
            _ => panic!(
                "seed {seed:#x}: after rewinding to turn {t} the file has {:?} bytes, the model saved {:?}{}",
                got.as_ref().map(Vec::len),
                want.as_ref().map(Vec::len),
                match (want, &got) {
                    (Some(w), Some(g)) => format!(
                        "; first difference at byte {:?}",
                        w.iter().zip(g).position(|(a, b)| a != b)
                    ),
                    _ => String::new(),
                }
            ),
        }
        upto = i;
    }
}

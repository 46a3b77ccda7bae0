//! Directory listings: [`DirEntry`] and the `getdents64` reads behind them, whole
//! ([`read_dir_all`]) or one call at a time from the directory's position ([`read_dir_chunk`],
//! for `READDIR`, which resumes at the host filesystem's own cookie).
//!
//! `getdents64` rather than `readdir(3)`: the kernel's records give each entry's `d_off`
//! cookie, which the mount passes through as the FUSE offset.

use std::os::fd::{AsRawFd, BorrowedFd};

use super::io::lseek;
use super::{Errno, SysResult};

/// One directory entry as `getdents64` gives it.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Host inode number.
    pub ino: u64,
    /// `DT_*` type.
    pub kind: u8,
    /// The filesystem's cookie for the position after this entry (`d_off`): seeking the
    /// directory there resumes the listing with the next entry.
    pub next: u64,
    /// The name, never `.` or `..` unless `keep_dots` was asked.
    pub name: Vec<u8>,
}

/// Reads every entry of the directory behind `dir` (which must be opened for reading).
pub fn read_dir_all(dir: BorrowedFd<'_>, keep_dots: bool) -> SysResult<Vec<DirEntry>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    lseek(dir, 0, libc::SEEK_SET)?;
    loop {
        let chunk = read_dir_chunk(dir, &mut buf)?;
        if chunk.is_empty() {
            break;
        }
        out.extend(
            chunk
                .into_iter()
                .filter(|e| keep_dots || (e.name != b"." && e.name != b"..")),
        );
    }
    Ok(out)
}

/// One `getdents64` call from the directory's current position: the entries that fit in
/// `buf`, dots included; empty at the end.
pub fn read_dir_chunk(dir: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<Vec<DirEntry>> {
    // SAFETY: `buf` is writable for its length; getdents64 fills whole records.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(Errno::last());
    }
    let n = n as usize;
    let mut out = Vec::new();
    let mut pos = 0;
    // struct linux_dirent64: u64 d_ino, i64 d_off, u16 d_reclen, u8 d_type, char d_name[].
    while pos + 19 <= n {
        let word = |at: usize| {
            buf.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        };
        let (Some(ino), Some(next)) = (word(pos), word(pos + 8)) else {
            return Err(Errno(libc::EIO));
        };
        let reclen = u16::from_ne_bytes([buf[pos + 16], buf[pos + 17]]) as usize;
        let kind = buf[pos + 18];
        if reclen < 19 || pos + reclen > n {
            return Err(Errno(libc::EIO));
        }
        let name_bytes = &buf[pos + 19..pos + reclen];
        let len = name_bytes
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(name_bytes.len());
        out.push(DirEntry {
            ino,
            kind,
            next,
            name: name_bytes[..len].to_vec(),
        });
        pos += reclen;
    }
    Ok(out)
}

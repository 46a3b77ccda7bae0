//! What the person reading the output has set up: the width of their terminal and their time
//! zone. Both only shape what the CLI prints; nothing in the daemon or the store uses them.

use std::os::fd::{AsRawFd, BorrowedFd};

use super::{Errno, SysResult, check};

/// The width in columns of the terminal at `fd` (`TIOCGWINSZ`); `ENOTTY` when it is none.
pub fn terminal_columns(fd: BorrowedFd<'_>) -> SysResult<u16> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: `TIOCGWINSZ` writes one `winsize` through the pointer, which points to a local
    // that outlives the call; the descriptor is borrowed, so it stays open during it.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut size) })?;
    Ok(size.ws_col)
}

/// `unix` (seconds since the epoch) broken down in the local time zone, by `localtime_r(3)`:
/// the zone of `TZ`, else of `/etc/localtime`. `EOVERFLOW` when the year does not fit.
pub fn local_time(unix: i64) -> SysResult<libc::tm> {
    let time: libc::time_t = unix;
    // SAFETY: `tm` is integers and one pointer (`tm_zone`), for which all zeroes (null) is a
    // valid value; `localtime_r` overwrites it whole.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to locals that outlive the call; `localtime_r` writes only
    // `tm` (its `tm_zone` then points into the C library's static zone data, never freed, and
    // nothing here reads through it). It reads `TZ` from the environment, which no thread of
    // this crate changes.
    let done = unsafe { libc::localtime_r(&time, &mut tm) };
    if done.is_null() {
        Err(Errno(libc::EOVERFLOW))
    } else {
        Ok(tm)
    }
}

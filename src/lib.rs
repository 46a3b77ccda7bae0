//! ckpt-mount: a FUSE passthrough over a project folder that captures the pre-image of every
//! path before its first change in a turn, and rewinds the folder to the start of any turn.
//!
//! Layers: [`cli`] (commands) → [`daemon`] (mount and serve) → [`fs`] (the passthrough core and
//! its thin fuser adapter) → [`capture`] (policy) → [`store`] (blobs and journal); [`rewind`]
//! plans from the journal and applies through descriptors. All `unsafe` is in [`sys`].
#![deny(unsafe_code)]

pub mod capture;
pub mod cli;
pub mod daemon;
pub mod daemon_log;
pub mod diff;
pub mod engine;
pub mod errno;
pub mod failpoint;
pub mod fs;
pub mod fusermount;
pub mod identity;
pub mod ids;
pub mod info;
pub mod ipc;
pub mod moment;
pub mod mount_policy;
pub mod mounts;
pub mod past_tree;
pub mod quote;
pub mod relpath;
pub mod rewind;
pub mod seed;
pub mod store;
pub mod sync;
pub mod sys;
pub mod tree;
pub mod units;
pub mod versions;
pub mod vfs_options;
pub mod xattrs;

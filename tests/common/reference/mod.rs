//! The reference of the model tests, after mountpoint-s3's `tests/reftests`: one operation
//! type for what the tiers do to a folder and its history ([`ops`]), the seeded generators
//! that make cases of them ([`generators`]), the model of the folder ([`model`]) and of its
//! history ([`history`]). A tier keeps only its harness: how it executes an operation and how
//! it reads the folder back.
//!
//! - `tests/core_model.rs` (core tier): `CkptFs` called directly, checked against the model,
//!   each turn's start kept in a [`history::Turns`] of [`history::TurnRec`];
//! - `tests/model.rs` (mounted tier): system calls in a real mount, checked against a plain
//!   directory given the same calls, and each turn's start kept in a [`history::Turns`] of
//!   trees as `common::tree` reads them;
//! - `tests/shell_turns.rs` (shell tier): real programs in a real mount, each turn's start and
//!   end kept in a [`history::Turns`] of snapshots.
//!
//! The three tiers share the operations, the generators and the turns' history; what each
//! records at a turn's start is what it can observe (the model's tree and inodes, a mount's
//! tree, a snapshot with the inodes held open).

pub mod generators;
pub mod history;
pub mod model;
pub mod ops;

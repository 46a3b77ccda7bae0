//! The reference of the model tests, after mountpoint-s3's `tests/reftests`: one operation
//! type ([`Op`]) for what the tiers do to a folder and its history, and the seeded generators
//! that make cases of them. A tier keeps only its harness: how it executes an operation and
//! how it reads the folder back.
//!
//! - `tests/core_model.rs` (core tier): `CkptFs` called directly, next to an in-memory model;
//! - `tests/model.rs` (mounted tier): system calls in a real mount, next to a plain directory.

pub mod generators;
pub mod ops;

//! What a store's `VERSION` file holds: the format this build reads and writes, and the one it
//! migrates when it first opens it (`check_version` in `mod.rs`). Kept below every other part
//! of the store, since the refusal of an unknown format ([`super::StoreError::Version`]) names
//! the one this build reads.

/// Contents of the `VERSION` file of a store this build reads and writes. Version 2 is the
/// layout of docs/FORMAT.md: packs, `.zst` blobs, staged pre-images and journal lines up to
/// version 3 (inode identities and extended attributes).
pub const STORE_VERSION: &str = "ckpt-mount store 2\n";

/// A store this build migrates once, when it first opens it: version 1 had the same files,
/// and every line it wrote reads the same here (a version 1 build then refuses the store,
/// whose new lines it would misread).
pub(crate) const STORE_VERSION_1: &str = "ckpt-mount store 1\n";

//! [`Space`]: what a rewind needs of the disks against what they have free, and the one line
//! that refuses a rewind that does not fit ([`Space::shortfall`]). Measured by `space.rs`;
//! carried by a dry run's report and by the refusal. No I/O.

use crate::relpath::RelPath;
use crate::units::human_size;
use serde::{Deserialize, Serialize};

/// What a rewind needs of the disks, against what they have free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    /// Bytes the store takes at most for what the rewind saves (blobs and journal records).
    pub save_bytes: u64,
    /// Bytes the folder takes at most for what the rewind writes.
    pub write_bytes: u64,
    /// Bytes free on the store's disk (`None`: unknown).
    pub store_free: Option<u64>,
    /// Bytes free on the folder's disk, when that is another one than the store's.
    pub folder_free: Option<u64>,
    /// Whether the folder and its store are on one disk.
    pub same_disk: bool,
    /// Whether the rewind fits (an unknown free space counts as fitting).
    pub fits: bool,
    /// When it does not fit, the largest files the rewound turns created (and the rewind
    /// deletes), largest first: at most three, each a hundredth of what is missing at least
    /// (the largest always).
    pub created: Vec<SizedPath>,
}

/// A file and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizedPath {
    /// The path.
    pub path: RelPath,
    /// Its size in bytes.
    pub bytes: u64,
}

impl Space {
    /// Whether `save_bytes` and `write_bytes` fit in the space free.
    pub(super) fn fitting(&self) -> bool {
        if self.same_disk {
            self.store_free
                .is_none_or(|f| self.save_bytes.saturating_add(self.write_bytes) <= f)
        } else {
            self.store_free.is_none_or(|f| self.save_bytes <= f)
                && self.folder_free.is_none_or(|f| self.write_bytes <= f)
        }
    }

    /// The bytes missing: what must be freed for the rewind to fit (on both disks together).
    pub(super) fn missing(&self) -> u64 {
        let store = self.store_free.unwrap_or(u64::MAX);
        if self.same_disk {
            return (self.save_bytes.saturating_add(self.write_bytes)).saturating_sub(store);
        }
        let folder = self.folder_free.unwrap_or(u64::MAX);
        self.save_bytes.saturating_sub(store) + self.write_bytes.saturating_sub(folder)
    }

    /// Why the rewind does not fit, and what to do, in one line (without a leading capital:
    /// the caller says first that it is refused).
    pub fn shortfall(&self) -> String {
        let (save, write) = (self.save_bytes, self.write_bytes);
        let store_free = self.store_free.unwrap_or(0);
        let mut out;
        let short;
        if self.same_disk {
            let need = save.saturating_add(write);
            let writes = if write == 0 {
                String::new()
            } else {
                format!(", and {} to write into the folder", human_size(write))
            };
            out = format!(
                "not enough space on the disk of the folder and its store: the rewind needs {} ({} to save what it overwrites and deletes, for its undo{writes}) and {} is free",
                human_size(need),
                human_size(save),
                human_size(store_free)
            );
            short = format!("at least {}", human_size(need.saturating_sub(store_free)));
        } else {
            let folder_free = self.folder_free.unwrap_or(u64::MAX);
            out = format!(
                "not enough space: the rewind needs {} in the store, to save what it overwrites and deletes for its undo ({} free on its disk), and {} in the folder ({} free on its disk)",
                human_size(save),
                human_size(store_free),
                human_size(write),
                self.folder_free.map_or("?".into(), human_size)
            );
            let mut parts = Vec::new();
            if save > store_free {
                parts.push(format!(
                    "at least {} on the store's disk",
                    human_size(save - store_free)
                ));
            }
            if write > folder_free {
                parts.push(format!(
                    "at least {} on the folder's disk",
                    human_size(write - folder_free)
                ));
            }
            short = parts.join(" and ");
        }
        if !self.created.is_empty() {
            let named: Vec<String> = self
                .created
                .iter()
                .map(|f| format!("{} ({})", f.path, human_size(f.bytes)))
                .collect();
            out += &format!(
                "; the largest files the rewound turns created: {}",
                named.join(", ")
            );
        }
        out += &format!(
            "; free {short} (delete or move files off that disk) or see what a prune would free (ckpt-mount prune --dry-run), then run it again"
        );
        out
    }
}

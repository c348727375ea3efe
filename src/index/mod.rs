//! Kafka's sparse indexes: [`OffsetIndex`] (`.index`) and [`TimeIndex`] (`.timeindex`).
//!
//! Both are byte for byte Kafka's layouts (FORMAT.md §4), so that Kafka's
//! `DumpLogSegments` and a broker taking over the directory read them:
//!
//! | file | entry | fields, big-endian |
//! | --- | --- | --- |
//! | `.index` | 8 bytes | batch's last offset − base (i32), batch's first byte in `.log` (i32) |
//! | `.timeindex` | 12 bytes | largest timestamp so far (i64), its batch's last offset − base (i32) |
//!
//! Where partlog departs from Kafka, on purpose:
//! - **No preallocation.** Files grow by one positional write per entry, so a crash never
//!   leaves a tail of zeros that looks like entries, and a sealed index needs no trimming.
//! - **Lazy and cheap to open.** Opening a sealed index reads its length and last entry; it is
//!   mapped on its first lookup only (or read with positional reads where the storage cannot
//!   map), and [`OffsetIndex::release_mapping`] lets the log bound the number of mappings.
//! - **The active index lives in memory.** Its entries are mirrored in a vector; lookups never
//!   touch the file, and appends write the file first and publish in memory second.
//! - **An index can have no file.** `in_memory` makes an index that behaves as an active one
//!   but never touches a storage, so that a read-only log can rebuild an inconsistent index
//!   without writing or creating anything (ARCHITECTURE.md §3, invariant 22).
//! - **A mapped file is never shrunk.** Truncating a sealed index writes a new file and renames
//!   it over the old one; see [`OffsetIndex`] for the temporary name.
//!
//! All file I/O goes through [`Storage`](crate::storage::Storage). The shared machinery (entry
//! codec seam, locking, warm-tail search, replace-by-rename) is in `file.rs`; the two public
//! types only add their entry format, arguments and checks.

mod file;
mod offset_index;
mod time_index;

pub use offset_index::{OffsetIndex, OffsetPosition};
pub use time_index::{TimeIndex, TimestampOffset};

/// The suffix appended to an index file's name while a truncation writes its replacement.
/// A file with this suffix found at open is a leftover of a crash, to be deleted unread.
#[allow(
    unused_imports,
    reason = "for the log's loader, which deletes leftovers at open"
)]
pub(crate) use file::{TRUNCATION_TEMP_SUFFIX, truncation_temp_path};

use crate::error::{Error, Result};

/// Rejects a base offset whose relative range would overflow an i64, or that is negative.
fn check_base_offset(base_offset: i64) -> Result<()> {
    if base_offset < 0 || base_offset > i64::MAX - i64::from(i32::MAX) {
        return Err(Error::InvalidArgument {
            why: format!(
                "base offset {base_offset} is outside [0, i64::MAX - i32::MAX]: a segment's \
                 relative offsets must fit"
            ),
        });
    }
    Ok(())
}

/// `offset - base_offset`, which must lie in [0, i32::MAX].
fn relative_offset(base_offset: i64, offset: i64) -> Result<i32> {
    offset
        .checked_sub(base_offset)
        .and_then(|relative| i32::try_from(relative).ok())
        .filter(|relative| *relative >= 0)
        .ok_or_else(|| Error::InvalidArgument {
            why: format!(
                "offset {offset} is outside the segment's range [{base_offset}, {base_offset} + \
                 i32::MAX]"
            ),
        })
}

//! Walking the batches of a `.log` file through buffered positional reads.
//!
//! Reading a file batch by batch with one `pread` per header would cost a system call per batch;
//! the walker reads windows of [`WINDOW_BYTES`] and serves headers and whole batches from them.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::{
    Batch, BatchHeader, HEADER_SIZE_UP_TO_MAGIC, LEGACY_V1_HEADER_SIZE, LOG_OVERHEAD, LegacyHeader,
    RECORD_BATCH_OVERHEAD, peek_batch_frame,
};
use crate::storage::StorageFile;

/// How much the walker reads at once. Large enough to amortise the system call, small enough to
/// stay in the fastest buffered-read range measured on the build machine (64–256 KiB).
pub(crate) const WINDOW_BYTES: usize = 128 * 1024;

/// The framing of one batch, read from its first 17 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub position: u64,
    pub total_size: u64,
    pub magic: i8,
}

/// What a segment needs of a batch of any magic, read from its first bytes (no CRC check, no
/// records decoded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchSummary {
    /// The first offset, when known without decompressing: v2's baseOffset, an uncompressed
    /// legacy message's offset; `None` for a compressed legacy wrapper.
    pub base_offset: Option<i64>,
    /// The last offset (v2: base + lastOffsetDelta; legacy: the outer offset).
    pub last_offset: i64,
    /// v2's maxTimestamp; a legacy outer message's timestamp (-1 for magic 0).
    pub max_timestamp: i64,
}

impl BatchSummary {
    pub fn of_v2(header: &BatchHeader) -> BatchSummary {
        BatchSummary {
            base_offset: Some(header.base_offset),
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        }
    }

    pub fn of_legacy(header: &LegacyHeader) -> BatchSummary {
        BatchSummary {
            base_offset: (!header.is_compressed()).then_some(header.offset),
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp(),
        }
    }

    /// Reads the summary from the start of a batch whose frame says `magic`.
    ///
    /// A batch whose last offset overflows, or is `i64::MAX`, is corruption: no offset can
    /// follow it, so the segment's next offset would wrap to `i64::MIN`, and recovery would
    /// take the log for one that ends below its start and delete it. Appends never get there
    /// (they would need 2^63 offsets), so only damaged or hostile bytes say so.
    pub fn parse(bytes: &[u8], magic: i8) -> Result<BatchSummary, Corruption> {
        if magic == 2 {
            return BatchSummary::of_v2_checked(&BatchHeader::parse(bytes)?);
        }
        BatchSummary::of_legacy(&LegacyHeader::parse(bytes)?).followable()
    }

    /// The summary of a parsed v2 header, with [`parse`](Self::parse)'s checks: corruption
    /// when the last offset overflows or no offset can follow it.
    pub fn of_v2_checked(header: &BatchHeader) -> Result<BatchSummary, Corruption> {
        if header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta))
            .is_none()
        {
            return Err(Corruption::BadHeader("the last offset overflows i64"));
        }
        BatchSummary::of_v2(header).followable()
    }

    /// The summary, or corruption when its last offset is `i64::MAX` (see
    /// [`parse`](Self::parse)): every walk that sets a segment's next offset from file bytes
    /// goes through here.
    pub fn followable(self) -> Result<BatchSummary, Corruption> {
        if self.last_offset == i64::MAX {
            return Err(Corruption::BadHeader(
                "the last offset is i64::MAX: no offset can follow it",
            ));
        }
        Ok(self)
    }

    pub fn of(batch: &Batch<'_>) -> BatchSummary {
        match batch {
            Batch::V2(view) => BatchSummary::of_v2(view.header()),
            Batch::Legacy(view) => BatchSummary::of_legacy(view.header()),
        }
    }

    /// The offset after the batch. A summary from [`parse`](Self::parse) never ends at
    /// `i64::MAX`; one built from a checked batch view may, and then saturates rather than
    /// wraps to `i64::MIN`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }

    /// The lowest offset the batch is known to hold without decompressing it: what offset-order
    /// checks compare with the previous batch's next offset. For a compressed legacy wrapper
    /// only its last offset is known, so the check is weaker there.
    pub fn order_floor(&self) -> i64 {
        self.base_offset.unwrap_or(self.last_offset)
    }
}

/// What the walker found at a position.
#[derive(Debug)]
pub(crate) enum Step {
    /// A batch whose framing fits inside the walked range.
    Batch(Frame),
    /// The walked range ends exactly here.
    End,
    /// Bytes remain but not a whole batch: a torn tail (or a truncated file).
    Partial { available: u64, needed: u64 },
}

/// A buffered reader over `[0, end)` of one file.
///
/// The window is a caller's buffer when reads reuse one ([`BatchWalker::with_buffer`]): its
/// length only grows (the valid bytes are `window_len`), so steady-state reads neither allocate
/// nor zero-fill.
pub(crate) struct BatchWalker<'f> {
    file: &'f Arc<dyn StorageFile>,
    path: &'f Path,
    end: u64,
    window: Vec<u8>,
    window_start: u64,
    window_len: usize,
    read_ahead: usize,
    /// The file's bytes mapped in memory: served in place, with no system call and no copy.
    mapped: Option<&'f [u8]>,
}

impl<'f> BatchWalker<'f> {
    pub fn new(file: &'f Arc<dyn StorageFile>, path: &'f Path, end: u64) -> Self {
        BatchWalker::with_buffer(file, path, end, Vec::new(), WINDOW_BYTES)
    }

    /// A walker whose window is `buffer` (its contents are overwritten), reading at least
    /// `read_ahead` bytes per system call. Take the buffer back with
    /// [`into_buffer`](Self::into_buffer).
    pub fn with_buffer(
        file: &'f Arc<dyn StorageFile>,
        path: &'f Path,
        end: u64,
        buffer: Vec<u8>,
        read_ahead: usize,
    ) -> Self {
        BatchWalker {
            file,
            path,
            end,
            window: buffer,
            window_start: 0,
            window_len: 0,
            read_ahead: read_ahead.max(HEADER_SIZE_UP_TO_MAGIC),
            mapped: None,
        }
    }

    /// A walker over `mapped`, the file's bytes mapped in memory (at least `end` of them).
    pub fn over_mapping(
        file: &'f Arc<dyn StorageFile>,
        path: &'f Path,
        end: u64,
        mapped: &'f [u8],
    ) -> Self {
        let mut walker = BatchWalker::with_buffer(file, path, end, Vec::new(), 0);
        walker.mapped = Some(mapped);
        walker
    }

    /// `[position, min(want_end, end))` of the mapping, or `None` when there is none.
    fn mapped_range(&self, position: u64, want_end: u64) -> Option<Result<&'f [u8]>> {
        let mapped = self.mapped?;
        let to = want_end.min(self.end).min(mapped.len() as u64);
        let range = usize::try_from(position)
            .ok()
            .zip(usize::try_from(to).ok())
            .and_then(|(from, to)| mapped.get(from..to.max(from)));
        Some(range.ok_or_else(|| self.too_large(position)))
    }

    /// Sets how many bytes a window read reads at least: a read that knows where its batch lies
    /// reads just that batch.
    pub fn set_read_ahead(&mut self, read_ahead: usize) {
        self.read_ahead = read_ahead.max(HEADER_SIZE_UP_TO_MAGIC);
    }

    /// Whether the walker reads a mapping (its bytes are read in place, not into a window).
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// The bytes the walker holds now without another read, and the file position of the
    /// first: the window, or the whole mapping (up to the end).
    pub fn held(&self) -> (u64, &[u8]) {
        match self.mapped {
            Some(mapped) => {
                let to = usize::try_from(self.end)
                    .unwrap_or(usize::MAX)
                    .min(mapped.len());
                (0, mapped.get(..to).unwrap_or_default())
            }
            None => (
                self.window_start,
                self.window.get(..self.window_len).unwrap_or_default(),
            ),
        }
    }

    /// The buffer, and where in it the window's bytes (the file's bytes from
    /// [`window_start`](Self::window_start)) lie: `buffer[..len]`.
    pub fn into_buffer(self) -> (Vec<u8>, usize) {
        (self.window, self.window_len)
    }

    /// The file position of the window's first byte.
    pub fn window_start(&self) -> u64 {
        self.window_start
    }

    /// Makes the window start at `position` and hold up to `len` bytes of the file (clamped to
    /// the end), reading again only if the current window does not already cover them; returns
    /// the bytes it holds from `position` on, which may be fewer than `len` when the file ends
    /// early (a failed fsync can drop dirty pages).
    pub fn fill(&mut self, position: u64, len: usize) -> Result<&[u8]> {
        if let Some(range) = self.mapped_range(position, position.saturating_add(len as u64)) {
            return range;
        }
        let window_end = self.window_start + self.window_len as u64;
        let want_end = position.saturating_add(len as u64).min(self.end);
        if position < self.window_start || want_end > window_end {
            self.read_window(position, want_end)?;
        }
        let from =
            usize::try_from(position - self.window_start).map_err(|_| self.too_large(position))?;
        Ok(self.window.get(from..self.window_len).unwrap_or_default())
    }

    /// Reads the window anew from `position`: at least up to `want_end`, and `read_ahead`
    /// bytes if the file has them. Returns how many bytes it got.
    fn read_window(&mut self, position: u64, want_end: u64) -> Result<usize> {
        let read_len = (want_end.saturating_sub(position))
            .max(self.read_ahead as u64)
            .min(self.end.saturating_sub(position));
        let read_len = usize::try_from(read_len).map_err(|_| self.too_large(position))?;
        if self.window.len() < read_len {
            self.window.resize(read_len, 0);
        }
        // The bytes the window already holds from `position` on move to its front instead of
        // being read again: a walk over batches a little smaller than the window (100 KiB ones
        // in a 128 KiB window) would otherwise read most of the file twice.
        let window_end = self.window_start + self.window_len as u64;
        let mut got = 0;
        if self.window_start <= position && position < window_end {
            let from = usize::try_from(position - self.window_start)
                .map_err(|_| self.too_large(position))?;
            got = (self.window_len - from).min(read_len);
            self.window.copy_within(from..from + got, 0);
        }
        while got < read_len {
            let Some(target) = self.window.get_mut(got..read_len) else {
                break;
            };
            let n = self.file.read_at(target, position + got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        self.window_start = position;
        self.window_len = got;
        Ok(got)
    }

    /// Makes the window cover `[position, position + len)` (clamped to the end), reading ahead.
    fn ensure(&mut self, position: u64, len: usize) -> Result<&[u8]> {
        if let Some(range) = self.mapped_range(position, position.saturating_add(len as u64)) {
            let range = range?;
            let needed = position.saturating_add(len as u64).min(self.end) - position.min(self.end);
            if (range.len() as u64) < needed {
                return Err(Error::io(
                    self.path,
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("wanted {needed} bytes at offset {position} of the mapping"),
                    ),
                ));
            }
            return Ok(range);
        }
        let window_end = self.window_start + self.window_len as u64;
        let want_end = position.saturating_add(len as u64).min(self.end);
        if position < self.window_start || want_end > window_end {
            // Read ahead as far as the file goes, but insist only on the bytes asked for: the
            // file may end before `end` (a failed fsync can drop dirty pages).
            let needed =
                usize::try_from(want_end - position).map_err(|_| self.too_large(position))?;
            let got = self.read_window(position, want_end)?;
            if got < needed {
                return Err(Error::io(
                    self.path,
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "wanted {needed} bytes at offset {position}, file ends after {got}"
                        ),
                    ),
                ));
            }
        }
        let from =
            usize::try_from(position - self.window_start).map_err(|_| self.too_large(position))?;
        let to =
            usize::try_from(want_end - self.window_start).map_err(|_| self.too_large(position))?;
        Ok(&self.window[from..to])
    }

    fn too_large(&self, position: u64) -> Error {
        Error::Corrupt {
            file: self.path.to_path_buf(),
            position,
            what: Corruption::BadBatchLength(i32::MAX),
        }
    }

    fn corrupt(&self, position: u64, what: Corruption) -> Error {
        Error::Corrupt {
            file: self.path.to_path_buf(),
            position,
            what,
        }
    }

    /// Reads the framing of the batch at `position`.
    ///
    /// Kafka's rule: fewer than 17 bytes left, or a declared length that runs past the end, is a
    /// torn tail (`Step::Partial`), while a length below the v2 minimum is corruption.
    pub fn frame_at(&mut self, position: u64) -> Result<Step> {
        if position >= self.end {
            return Ok(Step::End);
        }
        let available = self.end - position;
        if available < HEADER_SIZE_UP_TO_MAGIC as u64 {
            return Ok(Step::Partial {
                available,
                needed: HEADER_SIZE_UP_TO_MAGIC as u64,
            });
        }
        let bytes = self.ensure(position, HEADER_SIZE_UP_TO_MAGIC)?;
        let frame = match peek_batch_frame(bytes) {
            Ok(Some(frame)) => frame,
            // Unreachable: at least 17 bytes were checked to be there.
            Ok(None) => {
                return Ok(Step::Partial {
                    available,
                    needed: HEADER_SIZE_UP_TO_MAGIC as u64,
                });
            }
            Err(what) => return Err(self.corrupt(position, what)),
        };
        let (batch_length, magic) = (frame.batch_length, frame.magic);
        let total_size = LOG_OVERHEAD as u64 + batch_length as u64;
        if total_size > available {
            return Ok(Step::Partial {
                available,
                needed: total_size,
            });
        }
        Ok(Step::Batch(Frame {
            position,
            total_size,
            magic,
        }))
    }

    /// The summary of the batch framed by `frame`, from its 61-byte v2 header or a legacy
    /// message's fixed fields.
    pub fn summary(&mut self, frame: &Frame) -> Result<BatchSummary> {
        let position = frame.position;
        let fixed_fields = if frame.magic == 2 {
            RECORD_BATCH_OVERHEAD
        } else {
            LEGACY_V1_HEADER_SIZE
        };
        let bytes = self.ensure(position, fixed_fields)?;
        BatchSummary::parse(bytes, frame.magic).map_err(|what| self.corrupt(position, what))
    }

    /// The whole batch framed by `frame`.
    pub fn batch_bytes(&mut self, frame: &Frame) -> Result<&[u8]> {
        let len = usize::try_from(frame.total_size).map_err(|_| self.too_large(frame.position))?;
        self.ensure(frame.position, len)
    }
}

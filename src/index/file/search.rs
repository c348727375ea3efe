//! The floor and ceiling search over an index's slots: Kafka's warm-tail binary search, which
//! tries the last 8 KiB of entries first so that lookups near the tail keep touching the same
//! pages, and the exact first-slot search that truncation uses on keys that may repeat. Both take
//! a key function, so they serve any view of the entries (a slice, a mapping, positional reads).

use crate::error::Result;

/// The result of a floor/ceiling search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRange {
    /// The largest slot whose key is <= the target.
    pub floor: Option<usize>,
    /// The smallest slot whose key is >= the target.
    pub ceil: Option<usize>,
}

/// Finds the floor and ceiling slots of `target` among `len` entries with strictly increasing
/// keys, trying the warm tail (the last `warm` entries) first as Kafka does.
///
/// On unsorted (corrupt) keys it still terminates with in-range slots; the answer is then simply
/// wrong, which the caller's check against the log catches.
pub(crate) fn slot_range(
    len: usize,
    warm: usize,
    mut key_at: impl FnMut(usize) -> Result<i64>,
    target: i64,
) -> Result<SlotRange> {
    let Some(last) = len.checked_sub(1) else {
        return Ok(SlotRange {
            floor: None,
            ceil: None,
        });
    };
    let first_hot = last.saturating_sub(warm);
    let hot_key = key_at(first_hot)?;
    // Invariant of the search below: key(lo) <= target, and lo_key caches key(lo).
    let (mut lo, mut lo_key, mut hi) = if hot_key < target {
        (first_hot, hot_key, last)
    } else {
        let first_key = if first_hot == 0 { hot_key } else { key_at(0)? };
        if first_key > target {
            return Ok(SlotRange {
                floor: None,
                ceil: Some(0),
            });
        }
        (0, first_key, first_hot)
    };
    while lo < hi {
        // Round up so that `lo = mid` always makes progress.
        let mid = lo + (hi - lo).div_ceil(2);
        let key = key_at(mid)?;
        match key.cmp(&target) {
            std::cmp::Ordering::Greater => hi = mid - 1,
            std::cmp::Ordering::Less => {
                lo = mid;
                lo_key = key;
            }
            std::cmp::Ordering::Equal => {
                return Ok(SlotRange {
                    floor: Some(mid),
                    ceil: Some(mid),
                });
            }
        }
    }
    if lo_key == target {
        return Ok(SlotRange {
            floor: Some(lo),
            ceil: Some(lo),
        });
    }
    Ok(SlotRange {
        floor: Some(lo),
        ceil: (lo < last).then_some(lo + 1),
    })
}

/// The first slot whose key is >= `target` among `len` entries with non-decreasing keys
/// (`len` if none). Unlike [`slot_range`] this is exact with duplicate keys, which the time
/// index's offsets may have; it serves truncation, which is rare, so it has no warm path.
pub(crate) fn partition_point(
    len: usize,
    mut key_at: impl FnMut(usize) -> Result<i64>,
    target: i64,
) -> Result<usize> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if key_at(mid)? < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::file::invalid;

    fn naive(keys: &[i64], target: i64) -> SlotRange {
        SlotRange {
            floor: keys.iter().rposition(|&k| k <= target),
            ceil: keys.iter().position(|&k| k >= target),
        }
    }

    fn search(keys: &[i64], warm: usize, target: i64) -> SlotRange {
        slot_range(
            keys.len(),
            warm,
            |n| keys.get(n).copied().ok_or_else(|| invalid("out of range")),
            target,
        )
        .unwrap()
    }

    #[test]
    fn slot_range_matches_a_linear_scan_around_every_key_and_the_warm_boundary() {
        for len in [0usize, 1, 2, 3, 7, 8, 9, 10, 17, 40] {
            let keys: Vec<i64> = (0..len as i64).map(|i| i * 3 + 5).collect();
            for warm in [0usize, 1, 2, 4, 8, 100] {
                for target in -1..(len as i64 * 3 + 9) {
                    assert_eq!(
                        search(&keys, warm, target),
                        naive(&keys, target),
                        "len {len} warm {warm} target {target}"
                    );
                }
            }
        }
    }

    #[test]
    fn slot_range_stays_in_bounds_on_unsorted_keys() {
        let keys = [9i64, 3, 7, 1, 1, 12, -4, 0, 5];
        for warm in 0..10 {
            for target in -6..15 {
                let range = search(&keys, warm, target);
                assert!(range.floor.is_none_or(|n| n < keys.len()));
                assert!(range.ceil.is_none_or(|n| n < keys.len()));
            }
        }
    }

    #[test]
    fn partition_point_is_exact_with_duplicates() {
        let keys = [1i64, 3, 3, 3, 5, 5, 9];
        for target in 0..11 {
            let expected = keys.iter().position(|&k| k >= target).unwrap_or(keys.len());
            let got = partition_point(keys.len(), |n| Ok(keys[n]), target).unwrap();
            assert_eq!(got, expected, "target {target}");
        }
    }
}

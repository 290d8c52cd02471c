//! A file's BLAKE3 tree cut at [`SEGMENT`] boundaries: the chaining value of each segment,
//! from which the file's BLAKE3 hash (what `b3sum` prints) follows. A mirror sends the
//! list; the client checks the list against the hash it trusts and then each segment,
//! from whichever mirror, against its entry — so one bad mirror is caught per segment (the
//! idea of the `bao` format, at 1 MiB granularity). Built on `blake3::hazmat`'s documented
//! subtree functions, and checked against `blake3::hash` for many lengths.

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

/// Bytes per segment: a power of two number of BLAKE3 chunks, so that every segment but
/// the last is a whole subtree of the file's tree.
pub const SEGMENT: u64 = 1 << 20;

/// Segments of a file of `len` bytes (an empty file has one, empty).
pub fn segment_count(len: u64) -> u64 {
    len.div_ceil(SEGMENT).max(1)
}

/// Bytes of segment `i` of a file of `len` bytes.
pub fn segment_len(len: u64, i: u64) -> u64 {
    len.saturating_sub(i * SEGMENT).min(SEGMENT)
}

/// The entry of segment `i` (holding `data`) of a file of `len` bytes: its chaining value,
/// or, when the file is that one segment, the file's hash itself.
pub fn segment_entry(len: u64, i: u64, data: &[u8]) -> [u8; 32] {
    if segment_count(len) == 1 {
        return *blake3::hash(data).as_bytes();
    }
    blake3::Hasher::new()
        .set_input_offset(i * SEGMENT)
        .update(data)
        .finalize_non_root()
}

/// The file's BLAKE3 hash from its segments' entries (`None`: not one per segment).
pub fn root(len: u64, entries: &[[u8; 32]]) -> Option<[u8; 32]> {
    if entries.len() as u64 != segment_count(len) {
        return None;
    }
    if entries.len() == 1 {
        return Some(entries[0]);
    }
    let (l, r) = halves(len, entries);
    Some(*merge_subtrees_root(&l, &r, Mode::Hash).as_bytes())
}

/// The chaining values of the two subtrees under the node covering `len` bytes of
/// `entries` (at least two segments).
fn halves(len: u64, entries: &[ChainingValue]) -> (ChainingValue, ChainingValue) {
    let left_len = left_subtree_len(len);
    let k = (left_len / SEGMENT) as usize;
    (
        subtree(left_len, &entries[..k]),
        subtree(len - left_len, &entries[k..]),
    )
}

fn subtree(len: u64, entries: &[ChainingValue]) -> ChainingValue {
    if entries.len() == 1 {
        return entries[0];
    }
    let (l, r) = halves(len, entries);
    merge_subtrees_non_root(&l, &r, Mode::Hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(data: &[u8]) -> Vec<[u8; 32]> {
        let len = data.len() as u64;
        (0..segment_count(len))
            .map(|i| {
                let at = (i * SEGMENT) as usize;
                let end = at + segment_len(len, i) as usize;
                segment_entry(len, i, &data[at..end])
            })
            .collect()
    }

    #[test]
    fn the_segments_give_the_files_blake3_hash() {
        let s = SEGMENT as usize;
        let mut data = vec![0u8; 9 * s + 77];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        for len in [
            0,
            1,
            1024,
            s - 1,
            s,
            s + 1,
            2 * s,
            3 * s + 5,
            4 * s,
            5 * s,
            8 * s + 1,
            9 * s + 77,
        ] {
            let d = &data[..len];
            let e = entries(d);
            assert_eq!(e.len() as u64, segment_count(len as u64));
            assert_eq!(
                root(len as u64, &e),
                Some(*blake3::hash(d).as_bytes()),
                "length {len}"
            );
        }
    }

    #[test]
    fn a_changed_segment_or_list_is_caught() {
        let s = SEGMENT as usize;
        let data: Vec<u8> = (0..3 * s + 9).map(|i| (i % 253) as u8).collect();
        let len = data.len() as u64;
        let good = entries(&data);
        let mut bad = data.clone();
        bad[s + 5] ^= 1;
        let seg1 = &bad[s..2 * s];
        assert_ne!(
            segment_entry(len, 1, seg1),
            good[1],
            "a flipped bit in segment 1"
        );
        assert_eq!(segment_entry(len, 2, &bad[2 * s..3 * s]), good[2]);
        let mut list = good.clone();
        list[2][0] ^= 1;
        assert_ne!(root(len, &list), root(len, &good), "an altered list");
        assert_eq!(root(len, &good[..2]), None, "a short list");
    }
}

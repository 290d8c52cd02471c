//! 31-bit sequence-number arithmetic (UDT4's `CSeqNo`): numbers wrap at 2^31, and two
//! numbers less than 2^30 apart compare by their distance.

use super::packet::MAX_SEQ;

/// Half the sequence space: numbers closer than this compare directly.
const THRESHOLD: i64 = 0x3FFF_FFFF;

/// Signed distance from `a` to `b` (`b − a`), taking the wrap into account.
pub fn offset(a: u32, b: u32) -> i32 {
    let d = i64::from(b & MAX_SEQ) - i64::from(a & MAX_SEQ);
    let d = if d.abs() < THRESHOLD {
        d
    } else if d < 0 {
        d + i64::from(MAX_SEQ) + 1
    } else {
        d - i64::from(MAX_SEQ) - 1
    };
    d as i32
}

/// Orders two sequence numbers: negative when `a` is before `b`.
pub fn cmp(a: u32, b: u32) -> core::cmp::Ordering {
    offset(b, a).cmp(&0)
}

/// `a` advanced by `n` (which may be negative), wrapping.
pub fn add(a: u32, n: i32) -> u32 {
    ((i64::from(a) + i64::from(n)).rem_euclid(i64::from(MAX_SEQ) + 1)) as u32
}

/// The number after `a`.
pub fn next(a: u32) -> u32 {
    add(a, 1)
}

/// The number before `a`.
pub fn prev(a: u32) -> u32 {
    add(a, -1)
}

/// Number of sequence numbers from `a` to `b` inclusive (`b` not before `a`).
pub fn len(a: u32, b: u32) -> u32 {
    (offset(a, b) + 1).max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cmp::Ordering;

    #[test]
    fn wraps() {
        assert_eq!(next(MAX_SEQ), 0);
        assert_eq!(prev(0), MAX_SEQ);
        assert_eq!(offset(MAX_SEQ, 2), 3);
        assert_eq!(offset(2, MAX_SEQ), -3);
        assert_eq!(cmp(MAX_SEQ, 1), Ordering::Less);
        assert_eq!(cmp(5, 5), Ordering::Equal);
        assert_eq!(len(MAX_SEQ - 1, 1), 4);
        assert_eq!(add(3, -5), MAX_SEQ - 1);
    }
}

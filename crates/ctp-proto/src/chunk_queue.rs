//! Received stream bytes queued for the application as the chunks they arrived in, read
//! either by copying into the reader's buffer or chunk by chunk without copying.

use bytes::Bytes;
use std::collections::VecDeque;

/// Copies the front of `q` into `buf` and consumes what it copied; returns how many bytes.
pub fn read_into(q: &mut VecDeque<Bytes>, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        let Some(front) = q.front_mut() else {
            break;
        };
        let take = front.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&front[..take]);
        let _ = front.split_to(take);
        if front.is_empty() {
            q.pop_front();
        }
        n += take;
    }
    n
}

/// Takes at most `max` bytes off the front chunk of `q` without copying them (empty when
/// `q` is, or `max` is 0).
pub fn take_front(q: &mut VecDeque<Bytes>, max: usize) -> Bytes {
    let Some(front) = q.front_mut() else {
        return Bytes::new();
    };
    if front.len() > max {
        return front.split_to(max);
    }
    q.pop_front().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> VecDeque<Bytes> {
        VecDeque::from([Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")])
    }

    #[test]
    fn copies_across_chunks_and_keeps_the_rest() {
        let mut q = queue();
        let mut buf = [0u8; 4];
        assert_eq!(read_into(&mut q, &mut buf), 4);
        assert_eq!(&buf, b"abcd");
        assert_eq!(q, [Bytes::from_static(b"efgh")]);
        let mut big = [0u8; 10];
        assert_eq!(read_into(&mut q, &mut big), 4);
        assert_eq!(&big[..4], b"efgh");
        assert!(q.is_empty());
    }

    #[test]
    fn takes_chunks_whole_or_their_first_bytes() {
        let mut q = queue();
        assert_eq!(take_front(&mut q, 100), Bytes::from_static(b"abc"));
        assert_eq!(take_front(&mut q, 2), Bytes::from_static(b"de"));
        assert_eq!(take_front(&mut q, 0), Bytes::new());
        assert_eq!(take_front(&mut q, 100), Bytes::from_static(b"fgh"));
        assert_eq!(take_front(&mut q, 100), Bytes::new());
    }
}

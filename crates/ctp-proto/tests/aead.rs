//! AEAD packet protection through the public packet path, as a connection uses it: packets
//! built with `ShortPacket`, numbers truncated by distance, a lossy path that reorders and
//! duplicates, numbers recovered from the largest received, keys updated every few dozen
//! packets.

use ctp_proto::packet::{open_short, ShortPacket};
use ctp_proto::protection::{Aead, PacketProtection, Suite};
use ctp_proto::wire::truncated::Truncated;

/// xorshift64*: a deterministic path.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn frames_of(pn: u64) -> Vec<u8> {
    (0..(pn % 900) as usize + 1)
        .map(|i| (i as u64 ^ pn) as u8)
        .collect()
}

#[test]
fn packets_over_a_lossy_reordering_path_with_key_updates_open_once() {
    for suite in Suite::ALL {
        let (x, y) = ([0x5a; 32], [0xa5; 32]);
        let mut sender = Aead::new(suite, x, y).with_update_after(50);
        let mut receiver = Aead::new(suite, y, x);
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        const COUNT: u64 = 20_000;

        // The path: 5 % lost, 2 % duplicated, and each packet delayed by up to 20 slots.
        let mut in_flight: Vec<(u64, u64, Vec<u8>)> = Vec::new(); // (arrival, pn, bytes)
        let mut largest_acked: Option<u64> = None;
        let mut largest_received: Option<u64> = None;
        let mut opened = vec![0u32; COUNT as usize];
        let mut sent = vec![false; COUNT as usize];
        let (mut duplicates, mut refused) = (0u64, 0u64);
        for slot in 0..COUNT + 40 {
            if slot < COUNT {
                let pn = slot;
                let distance = largest_acked.map(|a| pn - a);
                let mut out = Vec::new();
                let p = ShortPacket::begin(&mut out, 7, pn, Truncated::encode(pn, distance));
                out.extend_from_slice(&frames_of(pn));
                p.seal(&mut out, &mut sender);
                if rng.below(100) >= 5 {
                    sent[pn as usize] = true;
                    let copies = if rng.below(100) < 2 { 2 } else { 1 };
                    duplicates += copies - 1;
                    for _ in 0..copies {
                        in_flight.push((slot + rng.below(20), pn, out.clone()));
                    }
                }
            }
            in_flight.sort_by_key(|&(arrival, _, _)| core::cmp::Reverse(arrival));
            while in_flight
                .last()
                .is_some_and(|&(arrival, _, _)| arrival <= slot)
            {
                let (_, pn, mut bytes) = in_flight.pop().unwrap();
                let expected = largest_received.map_or(0, |l| l + 1);
                match open_short(&mut bytes, &mut receiver, |t| Some(t.expand(expected))) {
                    Ok(o) => {
                        assert_eq!(o.pn, pn, "{suite}");
                        assert_eq!(o.frames, &frames_of(pn)[..], "{suite} pn {pn}");
                        opened[pn as usize] += 1;
                        largest_received = Some(largest_received.map_or(pn, |l| l.max(pn)));
                        // The acknowledgement reaches the sender at once.
                        largest_acked = largest_received;
                    }
                    Err(_) => refused += 1,
                }
            }
        }
        for pn in 0..COUNT as usize {
            assert_eq!(opened[pn], u32::from(sent[pn]), "{suite} pn {pn}");
        }
        let delivered = sent.iter().filter(|&&s| s).count() as u64;
        let s = receiver.stats();
        assert_eq!(s.opened, delivered, "{suite}");
        assert_eq!(
            refused, duplicates,
            "{suite}: only the duplicates are refused"
        );
        assert_eq!(s.replays, duplicates, "{suite}");
        assert_eq!(s.failed_opens, 0, "{suite}");
        assert_eq!(
            receiver.recv_generation(),
            sender.send_generation(),
            "{suite}"
        );
        assert_eq!(sender.send_generation(), (COUNT - 1) / 50, "{suite}");
        assert_eq!(sender.stats().sealed, COUNT);
        assert_eq!(sender.name(), suite.name());
    }
}

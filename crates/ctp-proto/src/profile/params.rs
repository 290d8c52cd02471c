//! The tunable parameters of a profile ([`Params`]), their ranges, and the limits they are
//! checked against.

use super::error::ProfileError;
use crate::wire::sizes::MIN_UDP_PAYLOAD;
use ctp_cc::CcKind;

/// Tunable parameters of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Largest UDP payload sent on an IPv4 path (1472 fills a 1500-byte MTU). IPv6's
    /// header is 20 bytes longer, so IPv6 paths use 20 bytes less ([`Params::for_peer`]).
    pub max_udp_payload: u16,
    /// Flow window, segments.
    pub flow_window: u32,
    /// Largest message, bytes.
    pub max_message: u32,
    /// Idle timeout, milliseconds.
    pub idle_timeout_ms: u32,
    /// Keep-alive interval, milliseconds.
    pub keepalive_ms: u32,
    /// Minimum retransmission timeout, microseconds.
    pub min_rto_us: u32,
    /// Longest the receiver delays an acknowledgement, microseconds.
    pub max_ack_delay_us: u32,
    /// Initial congestion window, packets.
    pub initial_window: u32,
    /// Send queue limit, bytes.
    pub send_buffer: u32,
    /// Receive buffer limit, bytes.
    pub recv_buffer: u32,
    /// How long `lossy-fifo` waits for a missing message before skipping it, milliseconds.
    pub fifo_deadline_ms: u32,
    /// Data segments per FEC block.
    pub fec_k: u8,
    /// Repair shards per FEC block.
    pub fec_m: u8,
    /// A partial FEC block is encoded after this long, milliseconds.
    pub fec_flush_ms: u32,
    /// Segments per `coded` block (1..=[`MAX_CODED_K`]; negotiated: the smaller side's).
    pub coded_k: u16,
    /// `coded` blocks open at once (negotiated: the smaller side's). With `coded_k` it
    /// bounds what each side holds: `coded_k × coded_blocks` segments.
    pub coded_blocks: u16,
    /// `fixed-interval` delivers one message per this many microseconds.
    pub jitter_interval_us: u32,
    /// `playout` delays every message by this many milliseconds after its sender timing.
    pub playout_delay_ms: u32,
    /// The algorithm the `cc` microprotocol runs (carried in the handshake).
    pub cc: CcKind,
    /// Rate of rate-configured algorithms (`blast`, `group`'s initial share), kbit/s.
    pub cc_rate_kbps: u32,
    /// Without `arq`, how long `causal` lets a message wait for missing predecessors before
    /// declaring them lost, milliseconds.
    pub causal_deadline_ms: u32,
    /// The AEAD suites `secure` may use, a bit per suite (bit `id - 1` for the suite
    /// numbered `id`: 1 AES-128-GCM, 2 ChaCha20-Poly1305): the
    /// initiator offers these, the responder picks one of them it also allows.
    pub suites: u8,
}

/// Largest `coded_k`: a block is cut whole before its first symbol leaves, and the engine
/// cuts at most twice this many segments ahead.
pub const MAX_CODED_K: u16 = 64;
/// Largest `coded_blocks`.
pub const MAX_CODED_BLOCKS: u16 = 1024;

/// Smallest flow window, segments.
pub const MIN_FLOW_WINDOW: u32 = 16;
/// Largest message size a profile may set.
pub const MAX_MESSAGE_LIMIT: u32 = 1 << 30;

impl Default for Params {
    fn default() -> Self {
        Params {
            max_udp_payload: 1472,
            flow_window: 16_384,
            max_message: 16 << 20,
            idle_timeout_ms: 30_000,
            keepalive_ms: 5_000,
            min_rto_us: 10_000,
            max_ack_delay_us: 5_000,
            initial_window: 10,
            send_buffer: 8 << 20,
            recv_buffer: 32 << 20,
            fifo_deadline_ms: 100,
            fec_k: 4,
            fec_m: 1,
            fec_flush_ms: 20,
            coded_k: 64,
            coded_blocks: 128,
            jitter_interval_us: 20_000,
            playout_delay_ms: 100,
            cc: CcKind::NewReno,
            cc_rate_kbps: 100_000,
            causal_deadline_ms: 100,
            suites: ALL_SUITES,
        }
    }
}

/// Every AEAD suite this implementation has, as a [`Params::suites`] mask.
pub const ALL_SUITES: u8 = 0b11;

/// How many bytes longer an IPv6 header is than an IPv4 one (40 against 20).
pub const IPV6_EXTRA_HEADER: u16 = 20;

impl Params {
    /// These parameters for a path to `peer`: over IPv6 (not IPv4-mapped), the UDP payload
    /// shrinks by [`IPV6_EXTRA_HEADER`] so that a datagram fills the same MTU, never below
    /// [`MIN_UDP_PAYLOAD`].
    pub fn for_peer(mut self, peer: std::net::SocketAddr) -> Self {
        let v6 = match peer.ip() {
            std::net::IpAddr::V4(_) => false,
            std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_none(),
        };
        if v6 {
            self.max_udp_payload = self
                .max_udp_payload
                .saturating_sub(IPV6_EXTRA_HEADER)
                .max(MIN_UDP_PAYLOAD);
        }
        self
    }

    /// These parameters with a flow window and a largest message the receive buffer can
    /// honour: credit for the whole window (each segment a full UDP payload) fits in the
    /// credited three quarters of `recv_buffer`, and a message in reassembly in half of it
    /// (`engine::admission`). Both sides apply it to what they offer, so the window they
    /// agree on (the smaller offer) fits both buffers.
    pub fn fit_recv_buffer(mut self) -> Self {
        let credited = u64::from(self.recv_buffer) / 4 * 3;
        let fit = (credited / u64::from(self.max_udp_payload)).max(MIN_FLOW_WINDOW.into());
        self.flow_window = self.flow_window.min(fit as u32);
        self.max_message = self.max_message.min(self.recv_buffer / 2);
        self
    }

    /// Checks every parameter's range.
    pub fn check(&self) -> Result<(), ProfileError> {
        let bad = |name, value: u64, hint| Err(ProfileError::Param { name, value, hint });
        if !(MIN_UDP_PAYLOAD..=65_000).contains(&self.max_udp_payload) {
            return bad(
                "max_udp_payload",
                self.max_udp_payload.into(),
                "1200..=65000 bytes",
            );
        }
        if !(MIN_FLOW_WINDOW..=1 << 20).contains(&self.flow_window) {
            return bad(
                "flow_window",
                self.flow_window.into(),
                "16..=1048576 segments",
            );
        }
        if !(1..=MAX_MESSAGE_LIMIT).contains(&self.max_message) {
            return bad(
                "max_message",
                self.max_message.into(),
                "1..=1073741824 bytes",
            );
        }
        if !(100..=3_600_000).contains(&self.idle_timeout_ms) {
            return bad(
                "idle_timeout_ms",
                self.idle_timeout_ms.into(),
                "100..=3600000 ms",
            );
        }
        if self.fifo_deadline_ms == 0 || self.fifo_deadline_ms > 60_000 {
            return bad(
                "fifo_deadline_ms",
                self.fifo_deadline_ms.into(),
                "1..=60000 ms",
            );
        }
        if self.causal_deadline_ms == 0 || self.causal_deadline_ms > 60_000 {
            return bad(
                "causal_deadline_ms",
                self.causal_deadline_ms.into(),
                "1..=60000 ms",
            );
        }
        if self.fec_k == 0 || self.fec_m == 0 || self.fec_k as usize + self.fec_m as usize > 256 {
            return bad(
                "fec_k/fec_m",
                self.fec_k as u64 * 1000 + self.fec_m as u64,
                "k ≥ 1, m ≥ 1, k + m ≤ 256",
            );
        }
        if self.fec_flush_ms == 0 || self.fec_flush_ms > 10_000 {
            return bad("fec_flush_ms", self.fec_flush_ms.into(), "1..=10000 ms");
        }
        if !(1..=MAX_CODED_K).contains(&self.coded_k) {
            return bad("coded_k", self.coded_k.into(), "1..=64 segments per block");
        }
        if !(1..=MAX_CODED_BLOCKS).contains(&self.coded_blocks) {
            return bad("coded_blocks", self.coded_blocks.into(), "1..=1024 blocks");
        }
        if self.jitter_interval_us == 0 {
            return bad("jitter_interval_us", 0, "at least 1 µs");
        }
        if self.playout_delay_ms > 600_000 {
            return bad(
                "playout_delay_ms",
                self.playout_delay_ms.into(),
                "0..=600000 ms",
            );
        }
        if self.cc_rate_kbps < 8 {
            return bad(
                "cc_rate_kbps",
                self.cc_rate_kbps.into(),
                "at least 8 kbit/s",
            );
        }
        if self.suites == 0 || self.suites & !ALL_SUITES != 0 {
            return bad(
                "suites",
                self.suites.into(),
                "a non-empty mask of known AEAD suites (1: AES-128-GCM, 2: ChaCha20-Poly1305)",
            );
        }
        if self.keepalive_ms == 0 {
            return bad("keepalive_ms", 0, "at least 1 ms");
        }
        if self.initial_window == 0 {
            return bad("initial_window", 0, "at least 1 packet");
        }
        if self.send_buffer < 65_536 || self.recv_buffer < 65_536 {
            return bad(
                "send_buffer/recv_buffer",
                self.send_buffer.min(self.recv_buffer).into(),
                "at least 65536 bytes",
            );
        }
        let least = u64::from(MIN_FLOW_WINDOW) * u64::from(self.max_udp_payload) / 3 * 4;
        if u64::from(self.recv_buffer) < least {
            return bad(
                "recv_buffer",
                self.recv_buffer.into(),
                "room for 16 full segments in its credited three quarters: at least 4/3 × 16 × max_udp_payload bytes",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_out_of_range_name_the_parameter() {
        // One value out of range per parameter (each just past a bound), and the name the
        // error must give with the range it must state.
        type Set = fn(&mut Params);
        let cases: &[(&str, &str, Set)] = &[
            ("max_udp_payload", "1200..=65000", |p| {
                p.max_udp_payload = 1199
            }),
            ("max_udp_payload", "1200..=65000", |p| {
                p.max_udp_payload = 65_001
            }),
            ("flow_window", "16..=1048576", |p| p.flow_window = 15),
            ("max_message", "1..=1073741824", |p| p.max_message = 0),
            ("idle_timeout_ms", "100..=3600000", |p| {
                p.idle_timeout_ms = 99
            }),
            ("fifo_deadline_ms", "1..=60000", |p| {
                p.fifo_deadline_ms = 60_001
            }),
            ("causal_deadline_ms", "1..=60000", |p| {
                p.causal_deadline_ms = 0
            }),
            ("fec_k/fec_m", "k + m ≤ 256", |p| {
                (p.fec_k, p.fec_m) = (200, 57)
            }),
            ("fec_k/fec_m", "m ≥ 1", |p| p.fec_m = 0),
            ("fec_flush_ms", "1..=10000", |p| p.fec_flush_ms = 10_001),
            ("jitter_interval_us", "at least 1", |p| {
                p.jitter_interval_us = 0
            }),
            ("playout_delay_ms", "0..=600000", |p| {
                p.playout_delay_ms = 600_001
            }),
            ("cc_rate_kbps", "at least 8", |p| p.cc_rate_kbps = 7),
            ("keepalive_ms", "at least 1", |p| p.keepalive_ms = 0),
            ("suites", "non-empty mask", |p| p.suites = 0),
            ("suites", "known AEAD suites", |p| p.suites = 4),
            ("initial_window", "at least 1", |p| p.initial_window = 0),
            ("send_buffer/recv_buffer", "65536", |p| {
                p.send_buffer = 65_535
            }),
            ("send_buffer/recv_buffer", "65536", |p| {
                p.recv_buffer = 65_535
            }),
        ];
        assert!(Params::default().check().is_ok());
        for (name, range, set) in cases {
            let mut p = Params::default();
            set(&mut p);
            let e = p.check().unwrap_err().to_string();
            assert!(
                e.contains(&format!("`{name}`")) && e.contains(range),
                "{name}: {e}"
            );
        }
    }

    /// IPv6's header is 20 bytes longer: an IPv6 peer gets 20 bytes less UDP payload, an
    /// IPv4 (or IPv4-mapped) one the profile's figure, and nobody less than the floor.
    #[test]
    fn ipv6_peers_get_twenty_bytes_less_payload() {
        let p = Params::default();
        let at = |a: &str| p.for_peer(a.parse().unwrap()).max_udp_payload;
        assert_eq!(at("192.0.2.1:9"), 1472);
        assert_eq!(at("[::ffff:192.0.2.1]:9"), 1472);
        assert_eq!(at("[2001:db8::1]:9"), 1452);
        let small = Params {
            max_udp_payload: MIN_UDP_PAYLOAD + 5,
            ..p
        };
        let v6 = small.for_peer("[2001:db8::1]:9".parse().unwrap());
        assert_eq!(v6.max_udp_payload, MIN_UDP_PAYLOAD);
    }
}

//! The final summary both sides print: human-readable or JSON.

use crate::output::outln;
use ctp::{ConnectionStats, PerfCounters, PerfInstant, PerfMon};
use serde::Serialize;
use std::path::Path;

/// What was measured on one side of a transfer.
pub struct Measured<'a> {
    /// Bytes of file content.
    pub bytes: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// The connection's counters at the end.
    pub stats: &'a ConnectionStats,
    /// BLAKE3 digest.
    pub checksum: &'a [u8],
}

/// What one side of a transfer reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// "send" or "recv".
    pub role: &'static str,
    /// The file (sender: the source; receiver: where it was stored).
    pub file: String,
    /// The peer's address.
    pub peer: String,
    /// Profile used.
    pub profile: String,
    /// Bytes of file content the transfer holds.
    pub bytes: u64,
    /// Files in the transfer.
    pub files: u64,
    /// Directories in the transfer.
    pub directories: u64,
    /// Bytes of file content that crossed the connection: `bytes`, less what the receiver
    /// already had when the transfer resumed.
    pub transferred: u64,
    /// Seconds from connection to verified end.
    pub seconds: f64,
    /// Goodput (of the bytes transferred) in megabits per second.
    pub goodput_mbps: f64,
    /// Segments sent again.
    pub retransmissions: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Packets declared lost that an acknowledgement later showed had arrived.
    pub spurious_losses: u64,
    /// Retransmission timeouts (no acknowledgement for a whole RTO).
    pub timeouts: u64,
    /// Smoothed RTT at the end, milliseconds.
    pub rtt_ms: f64,
    /// BLAKE3 of the content, hex.
    pub checksum: String,
    /// "verified": both sides compared the checksum, so the content is whole and the
    /// sender's; "unverified": nothing proves it (a `--raw` stream on the UDT4 wire, which
    /// has neither an end-of-stream mark nor a way back for a checksum).
    pub complete: &'static str,
    /// Coded repair symbols this side sent (`coded` profile; 0 otherwise).
    pub repair_symbols: u64,
    /// Segments this side decoded from repair symbols (`coded` profile; 0 otherwise).
    pub decoded_segments: u64,
    /// Bytes this side put on the wire (headers, acknowledgements and repairs included).
    pub wire_bytes: u64,
    /// Paths the connection ran over at once at the end (`coded` with `--path`: several).
    pub paths: u64,
    /// The performance monitor at the end (`--stats`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf: Option<PerfReport>,
}

/// UDT's performance-monitor counters (totals) and the values at the end of a transfer: the
/// proto layer's own records, flattened into one JSON object.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerfReport {
    /// The counters since the connection started.
    #[serde(flatten)]
    pub total: PerfCounters,
    /// Sending rate since the start, Mb/s.
    pub mbps_send_rate: f64,
    /// Receiving rate since the start, Mb/s.
    pub mbps_recv_rate: f64,
    /// The values at the end.
    #[serde(flatten)]
    pub instant: PerfInstant,
}

impl From<&PerfMon> for PerfReport {
    /// The totals and values of the moment of one (non-clearing) query.
    fn from(p: &PerfMon) -> Self {
        PerfReport {
            total: p.total,
            mbps_send_rate: p.mbps_send_rate,
            mbps_recv_rate: p.mbps_recv_rate,
            instant: p.instant,
        }
    }
}

impl Summary {
    /// Builds a summary from what was measured.
    pub fn new(
        role: &'static str,
        file: &Path,
        peer: String,
        profile: &str,
        m: Measured<'_>,
    ) -> Self {
        Summary {
            role,
            file: file.display().to_string(),
            peer,
            profile: profile.to_string(),
            bytes: m.bytes,
            files: 1,
            directories: 0,
            transferred: m.bytes,
            seconds: m.seconds,
            goodput_mbps: goodput(m.bytes, m.seconds),
            retransmissions: m.stats.retransmissions,
            packets_lost: m.stats.packets_lost,
            spurious_losses: m.stats.spurious_losses,
            timeouts: m.stats.rto_expiries,
            rtt_ms: m.stats.srtt_us as f64 / 1000.0,
            repair_symbols: m.stats.coded_repairs_sent,
            decoded_segments: m.stats.coded_recovered,
            wire_bytes: m.stats.bytes_sent,
            paths: m.stats.routes,
            checksum: hex(m.checksum),
            complete: "verified",
            perf: None,
        }
    }

    /// Marks the content as unverified (see [`Summary::complete`]) when `verified` is false.
    pub fn verified(mut self, verified: bool) -> Self {
        if !verified {
            self.complete = "unverified";
        }
        self
    }

    /// Sets the counts of a transfer of `files` files and `directories` directories of
    /// which `transferred` content bytes crossed the connection (the goodput counts those).
    pub fn with_counts(mut self, files: u64, directories: u64, transferred: u64) -> Self {
        self.files = files;
        self.directories = directories;
        self.transferred = transferred;
        self.goodput_mbps = goodput(transferred, self.seconds);
        self
    }

    /// Adds the performance monitor (`--stats`).
    pub fn with_perf(mut self, perf: Option<&PerfMon>) -> Self {
        self.perf = perf.map(PerfReport::from);
        self
    }

    /// Prints the summary on stdout.
    pub fn print(&self, json: bool) {
        if json {
            outln!("{}", serde_json::to_string(self).unwrap_or_default());
            return;
        }
        let verb = if self.role == "send" {
            "sent"
        } else {
            "received"
        };
        let dir = if self.role == "send" { "to" } else { "from" };
        let mut what = if self.files == 1 && self.directories == 0 {
            format!("{} ({})", self.file, human_bytes(self.bytes))
        } else {
            format!(
                "{}: {} files, {} directories ({})",
                self.file,
                self.files,
                self.directories,
                human_bytes(self.bytes)
            )
        };
        if self.transferred < self.bytes {
            what += &format!(", resumed: {} {verb} now", human_bytes(self.transferred));
        }
        outln!(
            "{verb} {what} {dir} {} in {:.2} s: {:.1} Mb/s, {} retransmissions, {} packets lost, RTT {:.2} ms [{}]",
            self.peer,
            self.seconds,
            self.goodput_mbps,
            self.retransmissions,
            self.packets_lost,
            self.rtt_ms,
            self.profile
        );
        if self.repair_symbols > 0 || self.decoded_segments > 0 {
            outln!(
                "coding: {} repair symbols sent, {} segments decoded from repairs, {} on the wire",
                self.repair_symbols,
                self.decoded_segments,
                human_bytes(self.wire_bytes)
            );
        }
        if self.paths > 1 {
            outln!("paths: {} at once", self.paths);
        }
        if !self.checksum.is_empty() {
            outln!("blake3 {}", self.checksum);
        }
        if self.complete != "verified" {
            outln!("complete: {}", self.complete);
        }
        if let Some(r) = &self.perf {
            let (p, i) = (&r.total, &r.instant);
            outln!(
                "perfmon: sent {} recv {} pkts, loss snd {} rcv {}, retrans {}, ACK sent {} recv {}, NAK sent {} recv {}, snd duration {} us, rate send {:.1} recv {:.1} Mb/s",
                p.pkt_sent, p.pkt_recv, p.pkt_snd_loss, p.pkt_rcv_loss, p.pkt_retrans,
                p.pkt_sent_ack, p.pkt_recv_ack, p.pkt_sent_nak, p.pkt_recv_nak,
                p.us_snd_duration, r.mbps_send_rate, r.mbps_recv_rate
            );
            outln!(
                "perfmon now: period {:.1} us, flow window {}, cwnd {}, flight {}, RTT {:.2} ms, bandwidth {:.1} Mb/s, free snd {} B rcv {} B",
                i.us_pkt_snd_period, i.pkt_flow_window, i.pkt_congestion_window,
                i.pkt_flight_size, i.ms_rtt, i.mbps_bandwidth, i.byte_avail_snd_buf,
                i.byte_avail_rcv_buf
            );
        }
    }
}

/// Megabits per second of `bytes` in `seconds` (0 without time).
fn goodput(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e6
    } else {
        0.0
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes with a binary unit.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_hex() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }

    #[test]
    fn goodput_is_computed_and_json_has_every_field() {
        let s = Summary::new(
            "send",
            Path::new("f"),
            "p".into(),
            "reliable",
            Measured {
                bytes: 125_000_000,
                seconds: 1.0,
                stats: &ConnectionStats::default(),
                checksum: &[1; 32],
            },
        );
        assert_eq!(s.goodput_mbps, 1000.0);
        let resumed = s.clone().with_counts(3, 1, 25_000_000);
        assert_eq!(
            resumed.goodput_mbps, 200.0,
            "counts what crossed the connection"
        );
        assert_eq!((resumed.files, resumed.directories), (3, 1));
        let v: serde_json::Value = serde_json::to_value(&s).unwrap();
        for k in [
            "role",
            "file",
            "peer",
            "profile",
            "bytes",
            "files",
            "directories",
            "transferred",
            "seconds",
            "goodput_mbps",
            "retransmissions",
            "packets_lost",
            "spurious_losses",
            "timeouts",
            "rtt_ms",
            "repair_symbols",
            "decoded_segments",
            "wire_bytes",
            "paths",
            "checksum",
            "complete",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
    }
}

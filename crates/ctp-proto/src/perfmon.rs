//! The performance monitor (UDT's `CPerfMon` and `perfmon(u, &perf, clear)`): UDT's
//! counters as totals since the connection started, as counts since the last query that
//! cleared the interval, and the instantaneous values of the moment.
//!
//! The counters are derived from [`ConnectionStats`], so any connection has them; a
//! [`PerfMonitor`] only remembers the snapshot and time of the last clearing query.

use crate::stats::ConnectionStats;
use ctp_cc::time::Instant;

/// UDT's cumulative counters, over some period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfCounters {
    /// Data packets sent, retransmissions included (`pktSent`).
    pub pkt_sent: u64,
    /// Data packets received (`pktRecv`).
    pub pkt_recv: u64,
    /// Packets the sender found lost (NAK ranges and timeouts; `pktSndLoss`).
    pub pkt_snd_loss: u64,
    /// Packets the receiver found missing (`pktRcvLoss`).
    pub pkt_rcv_loss: u64,
    /// Data packets retransmitted (`pktRetrans`).
    pub pkt_retrans: u64,
    /// ACKs sent (`pktSentACK`).
    pub pkt_sent_ack: u64,
    /// ACKs received (`pktRecvACK`).
    pub pkt_recv_ack: u64,
    /// NAKs sent (`pktSentNAK`).
    pub pkt_sent_nak: u64,
    /// NAKs received (`pktRecvNAK`).
    pub pkt_recv_nak: u64,
    /// Bytes sent on the wire.
    pub bytes_sent: u64,
    /// Bytes received on the wire.
    pub bytes_received: u64,
    /// Microseconds spent with data to send (`usSndDuration`).
    pub us_snd_duration: u64,
}

impl PerfCounters {
    /// The counters of `s`.
    pub fn of(s: &ConnectionStats) -> Self {
        PerfCounters {
            pkt_sent: s.segments_sent,
            pkt_recv: s.segments_received,
            pkt_snd_loss: s.packets_lost,
            pkt_rcv_loss: s.receiver_losses,
            pkt_retrans: s.retransmissions,
            pkt_sent_ack: s.acks_sent,
            pkt_recv_ack: s.acks_received,
            pkt_sent_nak: s.naks_sent,
            pkt_recv_nak: s.naks_received,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            us_snd_duration: s.send_duration_us,
        }
    }

    /// What accumulated since `earlier`.
    pub fn since(&self, earlier: &PerfCounters) -> Self {
        PerfCounters {
            pkt_sent: self.pkt_sent.saturating_sub(earlier.pkt_sent),
            pkt_recv: self.pkt_recv.saturating_sub(earlier.pkt_recv),
            pkt_snd_loss: self.pkt_snd_loss.saturating_sub(earlier.pkt_snd_loss),
            pkt_rcv_loss: self.pkt_rcv_loss.saturating_sub(earlier.pkt_rcv_loss),
            pkt_retrans: self.pkt_retrans.saturating_sub(earlier.pkt_retrans),
            pkt_sent_ack: self.pkt_sent_ack.saturating_sub(earlier.pkt_sent_ack),
            pkt_recv_ack: self.pkt_recv_ack.saturating_sub(earlier.pkt_recv_ack),
            pkt_sent_nak: self.pkt_sent_nak.saturating_sub(earlier.pkt_sent_nak),
            pkt_recv_nak: self.pkt_recv_nak.saturating_sub(earlier.pkt_recv_nak),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            us_snd_duration: self.us_snd_duration.saturating_sub(earlier.us_snd_duration),
        }
    }
}

/// Values of the moment (UDT's instantaneous `CPerfMon` fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PerfInstant {
    /// Inter-packet period, microseconds (`usPktSndPeriod`; 0 = unpaced).
    pub us_pkt_snd_period: f64,
    /// The peer's flow window, packets (`pktFlowWindow`; 0 when the profile has none).
    pub pkt_flow_window: u64,
    /// Congestion window, packets (`pktCongestionWindow`; 0 = no window).
    pub pkt_congestion_window: u64,
    /// Packets sent and not yet acknowledged (`pktFlightSize`).
    pub pkt_flight_size: u64,
    /// Smoothed RTT, milliseconds (`msRTT`).
    pub ms_rtt: f64,
    /// Estimated link capacity, Mb/s (`mbpsBandwidth`; 0 when not estimated).
    pub mbps_bandwidth: f64,
    /// Bytes that can be written now (`byteAvailSndBuf`).
    pub byte_avail_snd_buf: u64,
    /// Free receive buffer, bytes (`byteAvailRcvBuf`).
    pub byte_avail_rcv_buf: u64,
}

/// One query's answer (`CPerfMon`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerfMon {
    /// Milliseconds since the connection started (`msTimeStamp`).
    pub ms_timestamp: u64,
    /// Since the connection started (UDT's `…Total` fields).
    pub total: PerfCounters,
    /// Since the last clearing query (or the start): UDT's local fields.
    pub interval: PerfCounters,
    /// Length of that interval, microseconds.
    pub interval_us: u64,
    /// Sending rate over the interval, Mb/s of wire bytes (`mbpsSendRate`).
    pub mbps_send_rate: f64,
    /// Receiving rate over the interval, Mb/s of wire bytes (`mbpsRecvRate`).
    pub mbps_recv_rate: f64,
    /// Values of the moment.
    pub instant: PerfInstant,
}

/// What a connection remembers between queries: the start, and the counters and time of
/// the last clearing query.
#[derive(Clone, Copy, Debug)]
pub struct PerfMonitor {
    start: Instant,
    mark: Instant,
    at_mark: PerfCounters,
}

impl PerfMonitor {
    /// A monitor for a connection that started at `start`.
    pub fn new(start: Instant) -> Self {
        PerfMonitor {
            start,
            mark: start,
            at_mark: PerfCounters::default(),
        }
    }

    /// Answers a query at `now` from the connection's counters `stats` and the values of the
    /// moment `instant`; with `clear` the next interval starts now.
    pub fn query(
        &mut self,
        now: Instant,
        stats: &ConnectionStats,
        instant: PerfInstant,
        clear: bool,
    ) -> PerfMon {
        let total = PerfCounters::of(stats);
        let interval = total.since(&self.at_mark);
        let interval_us = now.saturating_since(self.mark).as_micros() as u64;
        let mbps = |bytes: u64| {
            if interval_us == 0 {
                0.0
            } else {
                bytes as f64 * 8.0 / interval_us as f64
            }
        };
        let p = PerfMon {
            ms_timestamp: now.saturating_since(self.start).as_millis() as u64,
            total,
            interval,
            interval_us,
            mbps_send_rate: mbps(interval.bytes_sent),
            mbps_recv_rate: mbps(interval.bytes_received),
            instant,
        };
        if clear {
            self.mark = now;
            self.at_mark = total;
        }
        p
    }
}

/// The instantaneous values a connection without UDT's extra state can give: from its
/// counters, with `payload` bytes per packet (flow window and bandwidth unknown: 0).
pub fn instant_from_stats(s: &ConnectionStats, payload: u64, send_room: u64) -> PerfInstant {
    let payload = payload.max(1);
    PerfInstant {
        us_pkt_snd_period: if s.pacing_rate == 0 {
            0.0
        } else {
            payload as f64 * 1e6 / s.pacing_rate as f64
        },
        pkt_flow_window: 0,
        pkt_congestion_window: s.cwnd / payload,
        pkt_flight_size: s.bytes_in_flight.div_ceil(payload),
        ms_rtt: s.srtt_us as f64 / 1000.0,
        mbps_bandwidth: 0.0,
        byte_avail_snd_buf: send_room,
        byte_avail_rcv_buf: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    #[test]
    fn intervals_restart_only_on_clearing_queries() {
        let t0 = Instant::from_micros(5_000);
        let mut m = PerfMonitor::new(t0);
        let mut s = ConnectionStats {
            segments_sent: 100,
            retransmissions: 3,
            bytes_sent: 125_000,
            ..Default::default()
        };
        let q = m.query(
            t0 + Duration::from_secs(1),
            &s,
            PerfInstant::default(),
            false,
        );
        assert_eq!(q.ms_timestamp, 1000);
        assert_eq!((q.total.pkt_sent, q.interval.pkt_sent), (100, 100));
        assert_eq!(q.mbps_send_rate, 1.0);
        let q = m.query(
            t0 + Duration::from_secs(2),
            &s,
            PerfInstant::default(),
            true,
        );
        assert_eq!(q.interval.pkt_retrans, 3, "not cleared by the first query");
        assert_eq!(q.interval_us, 2_000_000);
        s.segments_sent = 150;
        s.retransmissions = 4;
        let q = m.query(
            t0 + Duration::from_secs(3),
            &s,
            PerfInstant::default(),
            true,
        );
        assert_eq!((q.total.pkt_sent, q.interval.pkt_sent), (150, 50));
        assert_eq!((q.total.pkt_retrans, q.interval.pkt_retrans), (4, 1));
        assert_eq!(q.interval_us, 1_000_000);
        assert_eq!(q.mbps_send_rate, 0.0, "no bytes in the interval");
    }

    #[test]
    fn instantaneous_values_from_counters() {
        let s = ConnectionStats {
            cwnd: 14_560,
            bytes_in_flight: 1_457,
            pacing_rate: 1_456_000,
            srtt_us: 61_500,
            ..Default::default()
        };
        let i = instant_from_stats(&s, 1456, 42);
        assert_eq!(i.pkt_congestion_window, 10);
        assert_eq!(i.pkt_flight_size, 2);
        assert_eq!(i.us_pkt_snd_period, 1000.0);
        assert_eq!(i.ms_rtt, 61.5);
        assert_eq!(i.byte_avail_snd_buf, 42);
    }
}

//! Counters of one connection and of an endpoint, as plain snapshots.

/// Every counter of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent on the wire (UDP payload).
    pub bytes_sent: u64,
    /// Packets received and accepted.
    pub packets_received: u64,
    /// Bytes received on the wire (UDP payload).
    pub bytes_received: u64,
    /// Application bytes handed to segments (first transmissions).
    pub app_bytes_sent: u64,
    /// Application bytes delivered to the application.
    pub app_bytes_delivered: u64,
    /// Messages (and stream chunks) delivered.
    pub messages_delivered: u64,
    /// Streams other than 0 this side holds state for, sending or receiving (a stream is
    /// forgotten once its end was sent, and read): what the streams cost now.
    pub streams_with_state: u64,
    /// Segments put in packets, including retransmissions.
    pub segments_sent: u64,
    /// Data packets (segments) received, duplicates included (`udt` profiles only).
    pub segments_received: u64,
    /// Packets the receiver found missing and reported (`udt` profiles only).
    pub receiver_losses: u64,
    /// ACK packets received (`udt` profiles only).
    pub acks_received: u64,
    /// Microseconds the sender had data waiting to be sent (`udt` profiles only).
    pub send_duration_us: u64,
    /// Segments sent again after loss or timeout.
    pub retransmissions: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Packets declared lost and acknowledged later after all.
    pub spurious_losses: u64,
    /// Retransmission-timer expiries.
    pub rto_expiries: u64,
    /// Duplicate segments received and dropped.
    pub duplicate_segments: u64,
    /// Segments dropped because they lay outside the receive window (`udt` profiles: also
    /// drop requests reaching past it, whose part beyond the window is ignored).
    pub out_of_window_segments: u64,
    /// Forward-error-correction repair frames sent.
    pub fec_repairs_sent: u64,
    /// Segments rebuilt from repair frames.
    pub fec_recovered: u64,
    /// Coded repair symbols sent (`coded`; its source symbols are the segments sent).
    pub coded_repairs_sent: u64,
    /// Segments decoded from coded repair symbols (`coded`).
    pub coded_recovered: u64,
    /// Coded symbols received that were combinations of those already held (`coded`).
    pub coded_not_innovative: u64,
    /// Messages delivered after their playout time.
    pub late_deliveries: u64,
    /// Incomplete messages abandoned (unreliable profiles).
    pub messages_abandoned: u64,
    /// Messages delivered before every predecessor they named (causal ordering's bounds).
    pub causal_released_early: u64,
    /// Segments sent compressed.
    pub segments_compressed: u64,
    /// Payload bytes compression saved (first transmissions).
    pub compression_saved_bytes: u64,
    /// Received packets dropped because a compressed segment did not inflate correctly.
    pub decompress_failed: u64,
    /// Largest UDP payload in use: the negotiated one, or what path MTU discovery confirmed.
    pub path_mtu: u64,
    /// Path-MTU probes sent.
    pub pmtu_probes_sent: u64,
    /// Path-MTU probes lost (not counted in `packets_lost`: they are not congestion).
    pub pmtu_probes_lost: u64,
    /// Black holes detected (repeated losses of full-size packets): fell back to 1200 bytes.
    pub pmtu_black_holes: u64,
    /// ACK frames sent.
    pub acks_sent: u64,
    /// NAK frames sent.
    pub naks_sent: u64,
    /// NAK frames received.
    pub naks_received: u64,
    /// Packets for this connection that failed to parse, dropped.
    pub malformed_dropped: u64,
    /// Received segments refused, unacknowledged, because the receive buffer was full (the
    /// sender retransmits them).
    pub segments_refused: u64,
    /// Protocol violations by the peer (each closes the connection).
    pub protocol_violations: u64,
    /// Data packets dropped because their payload exceeded what the negotiated maximum
    /// packet size allows (`udt` profiles).
    pub oversize_dropped: u64,
    /// Moves to another peer or local address (a NAT rebinding, a path given up).
    pub path_migrations: u64,
    /// Moves undone because the new peer address never answered path validation.
    pub path_validation_failures: u64,
    /// Routes the connection runs over at once (validated, not given up): 1, or more on a
    /// `coded` connection over several paths.
    pub routes: u64,
    /// Bytes sent to the current peer address while it is not validated (0 once it is):
    /// never more than three times `path_unvalidated_received`.
    pub path_unvalidated_sent: u64,
    /// Bytes received from the current peer address while it is not validated.
    pub path_unvalidated_received: u64,
    /// Smoothed RTT, microseconds.
    pub srtt_us: u64,
    /// RTT variation, microseconds.
    pub rttvar_us: u64,
    /// Minimum RTT, microseconds (0 before the first sample).
    pub min_rtt_us: u64,
    /// Current retransmission timeout, microseconds.
    pub rto_us: u64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Largest congestion window any segment was released under, bytes (0 without a
    /// window). Bytes in flight never exceed it by more than one packet, even when the
    /// window grew and shrank again between two looks at `cwnd`.
    pub cwnd_peak: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Pacing rate, bytes per second (0 = unpaced).
    pub pacing_rate: u64,
    /// Events dispatched to microprotocols.
    pub events_dispatched: u64,
    /// Sent packets the acknowledgement tracker still remembers (a gauge).
    pub tracked_packets: u64,
    /// Bytes of data the connection holds (send queue, live segments, reassembled messages
    /// waiting for ordering, receive queue): a gauge of its memory for data.
    pub buffered_bytes: u64,
}

/// Counters of a whole endpoint (packets that never reached a connection).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Datagrams dropped because they failed the integrity check.
    pub bad_checksum: u64,
    /// Datagrams dropped because the header did not parse.
    pub bad_header: u64,
    /// Datagrams dropped because of an unknown version.
    pub unknown_version: u64,
    /// Datagrams dropped because no connection had their id.
    pub unknown_connection: u64,
    /// Datagrams dropped because their source cannot be answered: port 0, the unspecified
    /// address, a broadcast or multicast address.
    pub bad_source: u64,
    /// Handshake packets dropped (bad cookie, malformed request, not accepting).
    pub handshake_dropped: u64,
    /// Connections refused with a reason.
    pub refused: u64,
    /// Connections accepted (on a secure channel: once the initiator authenticated).
    pub accepted: u64,
    /// Secure channels whose initiator never authenticated (no message 3 in time, or a
    /// key the peer policy refused): removed without being shown to the application.
    pub handshake_failed: u64,
    /// NOSTATE packets sent: answers to short packets for a connection id this endpoint
    /// does not know.
    pub nostate_sent: u64,
    /// Short packets for an unknown connection id left unanswered: too small to answer
    /// without amplifying, over the NOSTATE rate limit, or with the reply queue full.
    pub nostate_unanswered: u64,
    /// NOSTATE packets honoured: their echo matched the last packet a connection sent,
    /// which ended it (or its drain).
    pub nostate_honoured: u64,
    /// NOSTATE packets received and ignored: malformed, for no connection here, or with an
    /// echo that is not the end of the last packet the connection sent (forged or stale).
    pub nostate_ignored: u64,
    /// INIT_ACKs that asked a client puzzle (the endpoint was under load).
    pub puzzles_asked: u64,
    /// COOKIE_ECHOs whose puzzle was checked, at most one hash each (what the puzzle costs
    /// the responder), whether solved or not.
    pub puzzles_verified: u64,
    /// COOKIE_ECHOs dropped because the puzzle their cookie asks was not solved (no or a
    /// wrong solution, or an easier cookie than asked now, grown stale); also counted in
    /// `handshake_dropped`.
    pub puzzle_failed: u64,
    /// Hashes this endpoint spent solving responders' puzzles, as an initiator.
    pub puzzle_hashes: u64,
    /// Half-open connections removed to make room for a newer one, the endpoint holding as
    /// many as it allows (oldest first).
    pub half_open_evicted: u64,
    /// Gauge: connections half-open now (secure channels created from a cookie whose
    /// initiator has not authenticated yet, until they are removed).
    pub half_open: u64,
    /// Gauge: the client puzzle's difficulty an INIT_ACK asks now (bits; 0: none).
    pub puzzle_difficulty: u64,
    /// Destination-unreachable reports (ICMP) the runtime passed on.
    pub unreachable_reports: u64,
    /// Connection attempts those reports ended (still in their handshake).
    pub unreachable_ended: u64,
}

impl EndpointStats {
    /// All datagrams dropped before reaching a connection.
    pub fn malformed_dropped(&self) -> u64 {
        self.bad_checksum
            + self.bad_header
            + self.unknown_version
            + self.unknown_connection
            + self.bad_source
            + self.handshake_dropped
    }
}

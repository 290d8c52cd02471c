//! The UDT4 side of [`crate::Endpoint`]: connections are found by the destination socket
//! id every UDT4 packet carries; a listening endpoint answers first handshakes statelessly
//! with a SYN cookie and creates the connection when the cookie comes back, as UDT4's
//! listener does.

use super::conn::{UdtConfig, UdtConnection};
use super::handshake::{check_compatible, check_cookie, mint_cookie};
use super::packet::{req, Control, ControlBody, Packet, MAX_SEQ};
use super::WireFormat;
use crate::connection::Connection;
use crate::endpoint::{ConnectionHandle, Endpoint, EndpointEvent};
use crate::profile::{Profile, ProfileError};
use ctp_cc::time::Instant;
use rand_chacha::rand_core::Rng;
use std::net::SocketAddr;

impl Profile {
    /// The `udt` profile: UDT4's stream socket, wire-compatible with the UDT4 library.
    /// The microprotocols listed are what UDT is made of (reliable, ordered, paced, UDT
    /// native congestion control); the UDT connection implements them on UDT4's packets.
    pub fn udt() -> Self {
        let mut p = Profile::reliable()
            .with_cc(ctp_cc::CcKind::Udt)
            .expect("reliable takes any cc");
        p.name = "udt".into();
        // MSS 1500 as UDT4: 1472 bytes of UDP payload.
        p.params.max_udp_payload = 1472;
        p.params.flow_window = 8192;
        p
    }

    /// The `udt-dgram` profile: UDT4's datagram (message) socket.
    pub fn udt_dgram() -> Self {
        Profile {
            name: "udt-dgram".into(),
            ..Self::udt()
        }
    }

    /// The wire format this profile needs.
    pub fn wire(&self) -> WireFormat {
        if super::PROFILES.iter().any(|(n, _)| *n == self.name) {
            WireFormat::Udt4
        } else {
            WireFormat::Ctp
        }
    }

    /// The UDT connection settings of a `udt` profile.
    pub fn udt_config(&self, handshake_timeout: core::time::Duration) -> UdtConfig {
        let p = &self.params;
        UdtConfig {
            dgram: self.name == "udt-dgram",
            mss: u32::from(p.max_udp_payload) + super::conn::IP_UDP_OVERHEAD,
            flow_window: p.flow_window.max(32),
            send_buffer: p.send_buffer.max(1 << 16) as usize,
            cc: p.cc,
            cc_rate: u64::from(p.cc_rate_kbps) * 125,
            handshake_timeout,
            expiry: core::time::Duration::from_millis(u64::from(p.idle_timeout_ms).max(1000)),
        }
    }
}

impl Endpoint {
    fn fresh_socket_id(&mut self) -> u32 {
        loop {
            let id = (self.rng.next_u32() & MAX_SEQ).max(1);
            if !self.by_cid.contains_key(&id) {
                return id;
            }
        }
    }

    /// Starts a UDT connection (client, or rendezvous when `rendezvous`).
    pub(crate) fn udt_connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        profile: &Profile,
        rendezvous: bool,
    ) -> Result<ConnectionHandle, ProfileError> {
        if profile.wire() != WireFormat::Udt4 {
            return Err(ProfileError::Unknown {
                what: "profile for a UDT4 endpoint",
                name: profile.name.clone(),
                known: "udt, udt-dgram".into(),
            });
        }
        if self.connection_count() == 0 {
            self.cfg.wire = WireFormat::Udt4;
        } else if self.cfg.wire != WireFormat::Udt4 {
            return Err(ProfileError::Unknown {
                what: "profile for a ctp-wire endpoint (bind a separate endpoint for UDT4)",
                name: profile.name.clone(),
                known: crate::profile::BUILTIN
                    .iter()
                    .map(|b| b.0)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let id = self.fresh_socket_id();
        let isn = self.rng.next_u32() & MAX_SEQ;
        let cfg = profile.udt_config(self.cfg.handshake_timeout);
        let u = if rendezvous {
            UdtConnection::rendezvous(now, remote, cfg, id, isn)
        } else {
            UdtConnection::client(now, remote, cfg, id, isn)
        };
        Ok(self.insert(u.with_profile(profile).into()))
    }

    /// Starts a rendezvous connection with `remote` (both sides call this; `udt` profiles
    /// only).
    pub fn connect_rendezvous(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        profile: &Profile,
    ) -> Result<ConnectionHandle, ProfileError> {
        profile.check()?;
        self.udt_connect(now, remote, profile, true)
    }

    /// The connection a first handshake (destination socket 0) from socket `peer_id` at
    /// `from` belongs to: the one whose peer is that socket, else a rendezvous connection
    /// with `from` that has not heard its peer yet. A client's connection in set-up is not
    /// one: its server addresses it by its socket id, and a first handshake from that
    /// address is a new connection for this endpoint's listener.
    fn udt_by_remote(&self, from: SocketAddr, peer_id: u32) -> Option<usize> {
        self.udt_by_peer
            .get(&(from, peer_id))
            .or_else(|| self.udt_rendezvous.get(&from)?.first())
            .copied()
    }

    /// Enters UDT connection `idx` into the first-handshake index (see
    /// [`Self::udt_by_remote`]).
    pub(crate) fn udt_index(&mut self, idx: usize) {
        let Some(u) = self.conns[idx].as_ref().and_then(Connection::udt) else {
            return;
        };
        let (remote, peer) = (u.remote(), u.peer_id());
        if peer != 0 {
            self.udt_by_peer.insert((remote, peer), idx);
        } else if u.is_rendezvous() {
            self.udt_rendezvous.entry(remote).or_default().push(idx);
        }
    }

    /// Takes connection `idx`, being forgotten, out of the first-handshake index (a
    /// connection on ctp's wire never was in it).
    pub(crate) fn unindex(&mut self, idx: usize, c: &Connection) {
        if let Some(u) = c.udt() {
            self.udt_unindex(idx, u.remote(), u.peer_id());
        }
    }

    /// Takes UDT connection `idx` (peer `remote`, socket `peer`) out of the index.
    pub(crate) fn udt_unindex(&mut self, idx: usize, remote: SocketAddr, peer: u32) {
        if self.udt_by_peer.get(&(remote, peer)) == Some(&idx) {
            self.udt_by_peer.remove(&(remote, peer));
        }
        if let Some(v) = self.udt_rendezvous.get_mut(&remote) {
            v.retain(|&i| i != idx);
            if v.is_empty() {
                self.udt_rendezvous.remove(&remote);
            }
        }
    }

    /// Processes one UDT4 datagram: routed by the destination socket id every UDT4 packet
    /// carries; a first handshake (socket 0) goes to the connection with that peer, else to
    /// the listener.
    pub(crate) fn udt_datagram(&mut self, now: Instant, from: SocketAddr, data: &mut [u8]) {
        let Some(dst) = Packet::peek_dst(data) else {
            self.stats.bad_header += 1;
            return;
        };
        let idx = if dst != 0 {
            self.by_cid.get(&dst).copied()
        } else {
            let hs = match Packet::parse(data) {
                Ok(Packet::Control(Control {
                    body: ControlBody::Handshake(hs),
                    ..
                })) => hs,
                Ok(_) => {
                    // Only a handshake may be addressed to no socket.
                    self.stats.unknown_connection += 1;
                    return;
                }
                Err(_) => {
                    self.stats.bad_header += 1;
                    return;
                }
            };
            let known = self.udt_by_remote(from, hs.socket_id as u32);
            if known.is_none() && self.cfg.accept {
                if !self.udt_listen(now, from, &hs) {
                    self.stats.handshake_dropped += 1;
                }
                return;
            }
            known
        };
        let Some(idx) = idx else {
            self.stats.unknown_connection += 1;
            return;
        };
        let peer_was = self.conns[idx]
            .as_ref()
            .and_then(Connection::udt)
            .map(|u| u.peer_id());
        if !self.deliver(now, idx, from, data) {
            return;
        }
        let peer_is = self.conns[idx]
            .as_ref()
            .and_then(Connection::udt)
            .map(|u| u.peer_id());
        if let (Some(was), true) = (peer_was, peer_is != peer_was) {
            // The peer's socket id became known (or changed): index it under that.
            self.udt_unindex(idx, from, was);
            self.udt_index(idx);
        }
    }

    /// A listener's answer to a first handshake: a cookie challenge, or — for a valid cookie
    /// echo — a new connection.
    fn udt_listen(
        &mut self,
        now: Instant,
        from: SocketAddr,
        hs: &super::packet::Handshake,
    ) -> bool {
        let profile = Profile::udt();
        let mut cfg = profile.udt_config(self.cfg.handshake_timeout);
        cfg.flow_window = cfg.flow_window.min(self.cfg.params.flow_window.max(32));
        cfg.cc = self.cfg.params.cc;
        cfg.dgram = hs.sock_type == super::packet::sock::DGRAM;
        if check_compatible(hs, cfg.dgram).is_err() {
            return false;
        }
        match hs.req_type {
            req::REQUEST if hs.cookie == 0 => {
                // Stateless: the request comes back with a cookie.
                let mut reply = *hs;
                reply.cookie = mint_cookie(&self.cfg.cookie_secret, from, hs.socket_id as u32, now);
                let mut out = Vec::new();
                Control::new(0, 0, hs.socket_id as u32, ControlBody::Handshake(reply))
                    .emit(&mut out);
                self.queue_stateless(from, out);
                true
            }
            req::RESPONSE => {
                let peer_id = hs.socket_id as u32;
                if !check_cookie(&self.cfg.cookie_secret, from, peer_id, now, hs.cookie)
                    || self.admits(from).is_err()
                {
                    return false;
                }
                let id = self.fresh_socket_id();
                let u = UdtConnection::server(now, from, cfg, id, hs);
                let profile = if u.is_dgram() {
                    Profile::udt_dgram()
                } else {
                    profile
                };
                let h = self.insert(u.with_profile(&profile).into());
                self.stats.accepted += 1;
                self.events.push_back(EndpointEvent::Incoming(h));
                true
            }
            _ => false,
        }
    }
}

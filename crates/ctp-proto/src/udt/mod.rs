//! The UDT4 wire format and protocol (the `udt` profiles): a codec that speaks UDT 4.11's
//! packets byte for byte, and a sans-IO UDT connection built on it, so that a ctp program
//! and a program using the UDT4 reference library can talk to each other.
//!
//! One concern per module: [`packet`] (the codec), [`seq`] (31-bit sequence arithmetic),
//! [`loss`] (loss lists), [`sender`] and [`receiver`] (buffers), [`handshake`] (set-up and
//! SYN cookie), [`conn`] (the connection and its timers), [`endpoint`] (demultiplexing by
//! socket id and the stateless listener inside [`crate::Endpoint`]).

pub mod conn;
pub mod endpoint;
pub mod handshake;
pub mod loss;
pub mod packet;
pub mod receiver;
pub mod sender;
pub mod seq;

/// The wire format of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// ctp's own packets (every profile but the `udt` ones).
    #[default]
    Ctp,
    /// UDT4's packets (the `udt` and `udt-dgram` profiles).
    Udt4,
}

/// The built-in profiles that speak UDT4, with one-line descriptions. They are kept apart
/// from [`crate::profile::BUILTIN`] because they need an endpoint of their own wire format
/// (the simulator and the composed-engine tests iterate that list).
pub const PROFILES: &[(&str, &str)] = &[
    (
        "udt",
        "UDT4 wire-compatible stream (talks to the UDT4 library): timer-based ACK/ACK2/NAK, UDT native rate control",
    ),
    (
        "udt-dgram",
        "UDT4 wire-compatible messages (UDT4 SOCK_DGRAM): TTL, in-order flag, drop requests",
    ),
];

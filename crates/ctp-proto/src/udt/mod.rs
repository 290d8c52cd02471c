//! The UDT4 wire format and protocol (the `udt` profile): a codec that speaks UDT 4.11's
//! packets byte for byte, and a sans-IO UDT connection built on it, so that a ctp program
//! and a program using the UDT4 reference library can talk to each other.
//!
//! One concern per module: [`packet`] (the codec), [`seq`] (31-bit sequence arithmetic).

pub mod handshake;
pub mod loss;
pub mod packet;
pub mod receiver;
pub mod sender;
pub mod seq;

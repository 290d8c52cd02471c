//! Declarations of the microprotocols built into the endpoint and the packet path rather
//! than composed into the engine: demultiplexing (`crate::endpoint`), the packet checksum
//! (`crate::protection`), connection setup (`crate::handshake`) and the secure channel
//! (`crate::handshake::noise`, `crate::protection::aead`). They bind no
//! events, but a profile names them like any other, so they are declared here.

use super::decl::{MicroDecl, MicroId};

/// The declaration of [`MicroId::Demux`]: what it needs, excludes and reads.
pub const DEMUX_DECL: MicroDecl = MicroDecl::new(MicroId::Demux);

/// The declaration of [`MicroId::Integrity`]: what it needs, excludes and reads.
pub const INTEGRITY_DECL: MicroDecl = MicroDecl::new(MicroId::Integrity);

/// The declaration of [`MicroId::Setup`]: what it needs, excludes and reads (the
/// parameters the handshake negotiates).
pub const SETUP_DECL: MicroDecl = MicroDecl {
    params: &[
        "max_udp_payload",
        "flow_window",
        "max_message",
        "idle_timeout_ms",
    ],
    ..MicroDecl::new(MicroId::Setup)
};

/// The declaration of [`MicroId::Secure`]: the Noise handshake rides on `setup`'s; the
/// AEAD suite is negotiated with it.
pub const SECURE_DECL: MicroDecl = MicroDecl {
    params: &["suites"],
    ..MicroDecl::new(MicroId::Secure)
};

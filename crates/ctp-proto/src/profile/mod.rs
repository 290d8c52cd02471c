//! Profiles: a set of microprotocols with their parameters, checked for missing
//! dependencies and conflicts, composed into an [`Engine`](crate::composed::Engine) and
//! negotiated in the handshake.
//!
//! One concern per module, everything re-exported here:
//!
//! - `catalogue`: sets of microprotocols ([`MicroSet`]), the mandatory and optional ones,
//!   and every microprotocol's declaration ([`MicroDecl`], written beside its code in
//!   [`crate::micro`]) in composition order ([`DECLS`]);
//! - `rules`: a set checked against the declarations ([`check_micros`], [`problems`],
//!   [`warnings`]); `error`: what is wrong with a profile ([`ProfileError`]);
//! - `params`: the tunable parameters ([`Params`]) and their limits;
//! - `builtins`: named compositions ([`Profile`]) and the built-in ones ([`BUILTIN`]);
//! - `negotiate`: the handshake's offers and the responder's decision ([`negotiate`]);
//! - `compose`: building an engine from a set ([`compose`], [`explain`]);
//! - [`file`](mod@file): profiles as TOML files.

mod builtins;
mod catalogue;
mod compose;
mod error;
pub mod file;
mod negotiate;
mod params;
mod rules;

pub use crate::wire::sizes::{CONTROL_RESERVE, MIN_UDP_PAYLOAD, PACKET_OVERHEAD, SEGMENT_OVERHEAD};
pub use builtins::{every_builtin, Profile, BUILTIN};
pub use catalogue::{
    Doubt, Group, MicroDecl, MicroId, MicroSet, Need, NeedOneOf, DECLS, MANDATORY, OPTIONAL,
};
pub use compose::{compose, explain, Explained, BUILT_INTO_ENDPOINT};
pub use error::ProfileError;
pub use negotiate::{decode_offer, encode_offer, negotiate, Isn, Negotiated};
pub use params::{Params, IPV6_EXTRA_HEADER, MAX_MESSAGE_LIMIT, MIN_FLOW_WINDOW};
pub use rules::{check_micros, problems, warnings};

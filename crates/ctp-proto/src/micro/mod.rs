//! The microprotocol catalogue. Each module implements one attribute and binds only to
//! events; [`AnyMicro`] gives the engine static dispatch over all of them. Each also
//! declares what it needs, what it excludes and which parameters it reads ([`decl`]).

pub mod ack_tracking;
pub mod arq;
pub mod built_in;
pub mod causal;
pub mod cc;
pub mod coded;
pub mod compression;
pub mod decl;
pub mod fec;
pub mod flow_gate;
pub mod flow_window;
pub mod fragmentation;
pub mod jitter;
pub mod keepalive;
pub mod newreno;
pub mod ordering;
pub mod pacing;
pub mod pmtud;
pub mod rts_cts;
pub mod rtt;
pub mod scp;
pub mod sequencing;
pub mod symbols;
pub mod tfrc;
pub mod window;
pub mod xon_xoff;

#[cfg(test)]
mod tests;

use crate::engine::event::{Event, EventKind};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, State};
use crate::wire::frame::{CompressedFrame, DataFrame};
use crate::wire::WireError;

macro_rules! any_micro {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// One composed microprotocol instance (an enum, so dispatch is a `match`, not a
        /// virtual call).
        #[derive(Debug)]
        pub enum AnyMicro {
            $(
                #[doc = concat!("See [`", stringify!($ty), "`].")]
                $variant($ty),
            )*
        }

        impl Microprotocol for AnyMicro {
            fn bindings(&self) -> &'static [EventKind] {
                match self { $(AnyMicro::$variant(m) => m.bindings(),)* }
            }
            #[inline]
            fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
                match self { $(AnyMicro::$variant(m) => m.handle(ev, cx),)* }
            }
            fn on_timer(&mut self, t: TimerId, cx: &mut Cx<'_, '_>) {
                match self { $(AnyMicro::$variant(m) => m.on_timer(t, cx),)* }
            }
            fn writes_frames(&self) -> bool {
                match self { $(AnyMicro::$variant(m) => m.writes_frames(),)* }
            }
            fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
                match self { $(AnyMicro::$variant(m) => m.write_frames(w, cx),)* }
            }
            fn owes_frames(&self, st: &State) -> bool {
                match self { $(AnyMicro::$variant(m) => m.owes_frames(st),)* }
            }
            fn decodes_segments(&self) -> bool {
                match self { $(AnyMicro::$variant(m) => m.decodes_segments(),)* }
            }
            fn decode_segment<'b>(
                &self,
                z: &CompressedFrame<'_>,
                limit: usize,
                out: &'b mut Vec<u8>,
            ) -> Result<DataFrame<'b>, WireError> {
                match self { $(AnyMicro::$variant(m) => m.decode_segment(z, limit, out),)* }
            }
        }
    };
}

// The largest states are boxed, so that the enum (one per composed microprotocol, in every
// connection) is as large as the common ones, not as the congestion-control library.
any_micro! {
    Fragmentation(fragmentation::Fragmentation),
    Sequencing(sequencing::Sequencing),
    AckTracking(Box<ack_tracking::AckTracking>),
    Rtt(rtt::RttEstimator),
    Arq(arq::Arq),
    Fifo(ordering::Fifo),
    Unordered(ordering::Unordered),
    LossyFifo(ordering::LossyFifo),
    FlowWindow(flow_window::FlowWindow),
    CongestionWindow(window::CongestionWindow),
    Pacing(pacing::Pacing),
    NewReno(newreno::NewReno),
    KeepAlive(keepalive::KeepAlive),
    Fec(Box<fec::Fec>),
    Coded(Box<coded::Coded>),
    Scp(scp::Scp),
    Tfrc(tfrc::Tfrc),
    XonXoff(xon_xoff::XonXoff),
    RtsCts(rts_cts::RtsCts),
    FixedInterval(jitter::FixedInterval),
    Playout(jitter::Playout),
    Urgent(ordering::Urgent),
    Cc(Box<cc::CcPolicy>),
    Causal(causal::Causal),
    Compression(compression::Compression),
    Pmtud(pmtud::Pmtud),
}

//! Composition: the microprotocols of a set, built with their parameters into an
//! [`Engine`] ([`compose`]), and what each one binds ([`explain`]).

use super::builtins::Profile;
use super::catalogue::{MicroId, MicroSet};
use super::negotiate::Isn;
use super::params::Params;
use crate::composed::Engine;
use crate::engine::app::AppIo;
use crate::engine::path::PathVars;
use crate::engine::segment::SegmentStore;
use crate::engine::session::Session;
use crate::engine::{Setup, SetupError, State};
use crate::micro::{self, AnyMicro};
use crate::wire::sizes::{AEAD_EXTRA, SEGMENT_OVERHEAD};
use core::time::Duration;

/// The congestion-control library's configuration from a profile's parameters.
fn cc_config(p: &Params) -> ctp_cc::Config {
    ctp_cc::Config {
        mss: p.max_udp_payload as u64,
        initial_window: p.initial_window as u64,
        rate: p.cc_rate_kbps as u64 * 125,
        max_window: p.flow_window as u64,
    }
}

/// Composes the microprotocols of `set` into an engine.
pub fn compose(set: MicroSet, p: &Params, local: Isn, peer: Isn) -> Result<Engine, SetupError> {
    let segment_overhead = SEGMENT_OVERHEAD
        + if set.has(MicroId::Secure) {
            AEAD_EXTRA
        } else {
            0
        }
        + if set.has(MicroId::Coded) {
            micro::coded::CODED_OVERHEAD
        } else {
            0
        };
    let mut session = Session {
        max_segment_payload: p.max_udp_payload as usize - segment_overhead,
        segment_overhead,
        next_seg_seq: local.seg,
        next_msg_seq: local.msg,
        peer_seg_isn: peer.seg,
        peer_msg_isn: peer.msg,
        recv_seg_cum: peer.seg,
        local_seg_isn: local.seg,
        ..Session::default()
    };
    let mut path = PathVars {
        rto_us: 200_000.max(p.min_rto_us as u64),
        plpmtu: p.max_udp_payload as usize,
        ..PathVars::default()
    };
    if set.has(MicroId::FlowWindow) {
        session.peer_max_seg = local.seg + p.flow_window as u64;
        session.recv_credit = peer.seg + p.flow_window as u64;
    }
    session.peer_segment_max = p.max_udp_payload as usize;
    let mut st = State {
        segs: SegmentStore::new(p.flow_window as usize),
        app: AppIo::with_limits(p.send_buffer as usize, p.recv_buffer as usize),
        next_pn: local.pn,
        routes: crate::engine::route::Routes {
            usable: 1,
            ..Default::default()
        },
        ..State::default()
    };
    let mut micros = Vec::new();
    let reliable = set.is_reliable();
    for m in set.iter() {
        let mut setup = Setup {
            holds: &mut st.holds,
            timers: &mut st.timers,
            index: micros.len() as u8,
        };
        let built = match m {
            MicroId::Demux | MicroId::Integrity | MicroId::Setup | MicroId::Secure => continue,
            MicroId::Fragmentation => {
                AnyMicro::Fragmentation(micro::fragmentation::Fragmentation::new(
                    p.max_message as usize,
                    reliable,
                    set.has(MicroId::Sequencing),
                ))
            }
            MicroId::Sequencing => {
                let (mode, width) = if reliable {
                    (micro::sequencing::WindowMode::Strict, p.flow_window as u64)
                } else {
                    (micro::sequencing::WindowMode::Sliding, 4096)
                };
                AnyMicro::Sequencing(micro::sequencing::Sequencing::new(mode, width))
            }
            MicroId::AckTracking => {
                AnyMicro::AckTracking(Box::new(micro::ack_tracking::AckTracking::new(
                    &mut setup,
                    Duration::from_micros(p.max_ack_delay_us as u64),
                )?))
            }
            MicroId::Rtt => AnyMicro::Rtt(micro::rtt::RttEstimator::new(
                p.min_rto_us as u64,
                60_000_000,
                p.max_ack_delay_us as u64,
            )),
            MicroId::Arq => AnyMicro::Arq(micro::arq::Arq::new(&mut setup)?),
            MicroId::Fifo => AnyMicro::Fifo(micro::ordering::Fifo::new(&mut setup)?),
            MicroId::Unordered => AnyMicro::Unordered(micro::ordering::Unordered::new(&mut setup)?),
            MicroId::Fec => AnyMicro::Fec(Box::new(micro::fec::Fec::new(
                &mut setup,
                p.fec_k,
                p.fec_m,
                Duration::from_millis(p.fec_flush_ms as u64),
            )?)),
            MicroId::Coded => AnyMicro::Coded(Box::new(micro::coded::Coded::new(
                &mut setup,
                p.coded_k,
                p.coded_blocks,
                session.max_segment_payload,
                cc_config(p),
                ctp_cc::time::Instant::ZERO,
            )?)),
            MicroId::LossyFifo => AnyMicro::LossyFifo(micro::ordering::LossyFifo::new(
                &mut setup,
                Duration::from_millis(p.fifo_deadline_ms as u64),
            )?),
            MicroId::FlowWindow => AnyMicro::FlowWindow(micro::flow_window::FlowWindow::new(
                &mut setup,
                p.flow_window as u64,
                peer.seg,
            )?),
            MicroId::CongestionWindow => {
                AnyMicro::CongestionWindow(micro::window::CongestionWindow::new(&mut setup)?)
            }
            MicroId::Pacing => AnyMicro::Pacing(micro::pacing::Pacing::new(&mut setup)?),
            MicroId::NewReno => AnyMicro::NewReno(micro::newreno::NewReno::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut path,
            )),
            MicroId::Scp => AnyMicro::Scp(micro::scp::Scp::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut path,
            )),
            MicroId::Tfrc => AnyMicro::Tfrc(micro::tfrc::Tfrc::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut path,
            )),
            MicroId::XonXoff => AnyMicro::XonXoff(micro::xon_xoff::XonXoff::new(&mut setup)?),
            MicroId::RtsCts => AnyMicro::RtsCts(micro::rts_cts::RtsCts::new(
                &mut setup, local.seg, peer.seg,
            )?),
            MicroId::FixedInterval => AnyMicro::FixedInterval(micro::jitter::FixedInterval::new(
                &mut setup,
                Duration::from_micros(p.jitter_interval_us as u64),
            )?),
            MicroId::Playout => AnyMicro::Playout(micro::jitter::Playout::new(
                &mut setup,
                Duration::from_millis(p.playout_delay_ms as u64),
            )?),
            MicroId::Urgent => AnyMicro::Urgent(micro::ordering::Urgent),
            MicroId::Cc => AnyMicro::Cc(Box::new(micro::cc::CcPolicy::new(
                p.cc,
                &cc_config(p),
                &mut path,
            ))),
            MicroId::Pmtud => AnyMicro::Pmtud(micro::pmtud::Pmtud::new(
                &mut setup,
                p.max_udp_payload as usize,
                &mut session,
                &mut path,
            )?),
            MicroId::Compression => {
                AnyMicro::Compression(micro::compression::Compression::new(&mut setup)?)
            }
            MicroId::Causal => AnyMicro::Causal(micro::causal::Causal::new(
                &mut setup,
                (!reliable).then(|| Duration::from_millis(p.causal_deadline_ms as u64)),
            )?),
            MicroId::KeepAlive => AnyMicro::KeepAlive(micro::keepalive::KeepAlive::new(
                &mut setup,
                Duration::from_millis(p.keepalive_ms as u64),
                Duration::from_millis(p.idle_timeout_ms as u64),
            )?),
        };
        micros.push(built);
    }
    session.stamp_messages = set.has(MicroId::Playout);
    if set.has(MicroId::Compression) {
        session.inflate_limit = p.max_udp_payload as usize;
    }
    st.session = session;
    st.path = path;
    Engine::new(micros, st)
}

/// One composed microprotocol as `ctp profiles --explain` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    /// The microprotocol.
    pub id: MicroId,
    /// Events it binds.
    pub events: Vec<crate::engine::event::EventKind>,
    /// True when it writes frames (message attributes) into packets.
    pub writes_frames: bool,
}

/// Microprotocols implemented by the endpoint and the packet path rather than composed into
/// the engine (they bind no events).
pub const BUILT_INTO_ENDPOINT: &[MicroId] = &[
    MicroId::Demux,
    MicroId::Integrity,
    MicroId::Setup,
    MicroId::Secure,
];

/// Composes `profile` and reports, for each microprotocol, the events it binds.
pub fn explain(profile: &Profile) -> Result<Vec<Explained>, SetupError> {
    use crate::engine::Microprotocol;
    let engine = compose(
        profile.micros,
        &profile.params,
        Isn::default(),
        Isn::default(),
    )?;
    let composed = profile
        .micros
        .iter()
        .filter(|m| !BUILT_INTO_ENDPOINT.contains(m));
    let mut out: Vec<Explained> = BUILT_INTO_ENDPOINT
        .iter()
        .filter(|m| profile.micros.has(**m))
        .map(|&id| Explained {
            id,
            events: Vec::new(),
            writes_frames: false,
        })
        .collect();
    for (id, m) in composed.zip(engine.micros()) {
        out.push(Explained {
            id,
            events: m.bindings().to_vec(),
            writes_frames: m.writes_frames(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;
    use MicroId::*;

    #[test]
    fn explain_lists_each_microprotocol_with_its_events() {
        use crate::engine::event::EventKind;
        let e = explain(&Profile::reliable()).unwrap();
        assert_eq!(e.len(), Profile::reliable().micros.iter().count());
        let find = |id| e.iter().find(|x| x.id == id).unwrap();
        assert!(find(Arq).events.contains(&EventKind::PacketLost));
        assert!(find(Pacing).events.contains(&EventKind::HoldLast));
        assert!(find(AckTracking).writes_frames && !find(Arq).writes_frames);
        assert!(find(Demux).events.is_empty());
    }

    #[test]
    fn builtins_compose() {
        for (name, _) in BUILTIN {
            let p = Profile::builtin(name).unwrap();
            let e = compose(p.micros, &p.params, Isn::default(), Isn::default()).unwrap();
            assert!(!e.micros().is_empty());
        }
    }
}

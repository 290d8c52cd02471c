//! What every networked command shares: the transport options made into a profile and
//! endpoint options, the keys asked for, a client endpoint and its connection, and the
//! signals that interrupt a command.

use crate::cli::TransportArgs;
use crate::failure::Failure;
use crate::keys;
use anyhow::{anyhow, Context};
use ctp::{Connection, Endpoint, EndpointOptions, Profile};
use std::net::SocketAddr;
use std::time::Duration;

/// The profile the transport options ask for, checked to be reliable (a file, a proxied
/// TCP connection or a measured stream must arrive whole), with their timeouts.
pub fn reliable_profile(t: &TransportArgs) -> Result<Profile, Failure> {
    let mut p = crate::profiles::resolve(&t.profile)?;
    if !p.is_reliable() {
        return Err(Failure::Usage(format!(
            "profile `{}` is not reliable, so data could arrive with holes; use --profile reliable (or coded)",
            t.profile
        )));
    }
    if !(t.idle_timeout.is_finite() && (0.1..=3600.0).contains(&t.idle_timeout)) {
        return Err(Failure::Usage(format!(
            "--idle-timeout {} is out of range: use 0.1 to 3600 seconds",
            t.idle_timeout
        )));
    }
    p.params.idle_timeout_ms = (t.idle_timeout * 1000.0) as u32;
    p.params.keepalive_ms = (p.params.idle_timeout_ms / 3).clamp(1, 5_000);
    p.check().map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(p)
}

/// Endpoint options matching the transfer options.
pub fn endpoint_options(
    t: &TransportArgs,
    profile: &Profile,
    accept: bool,
) -> Result<EndpointOptions, Failure> {
    if !(t.handshake_timeout.is_finite() && (0.1..=600.0).contains(&t.handshake_timeout)) {
        return Err(Failure::Usage(format!(
            "--handshake-timeout {} is out of range: use 0.1 to 600 seconds",
            t.handshake_timeout
        )));
    }
    if t.max_per_address == 0 {
        return Err(Failure::Usage(
            "--max-per-address 0 would refuse every peer: use 1 or more".into(),
        ));
    }
    Ok(EndpointOptions {
        accept,
        params: profile.params,
        handshake_timeout: Duration::from_secs_f64(t.handshake_timeout),
        wire: profile.wire(),
        max_connections_per_address: t.max_per_address,
        ..EndpointOptions::default()
    })
}

/// The encryption and keys a command asked for (`--peer-key`, `--allow`, `--key`,
/// `--insecure`), checked before anything is bound or sent: a key file, allow list or
/// configuration directory that cannot be used is a usage error. A profile on the UDT4
/// wire is never encrypted (UDT4 is not), so it takes no keys. With `--insecure` the
/// profile loses its encryption.
pub fn security(
    args: keys::SecurityArgs,
    profile: &mut ctp::Profile,
) -> Result<keys::Security, Failure> {
    if args.insecure {
        *profile = profile.clone().insecure();
    }
    let args = if native_wire(profile) {
        args
    } else {
        let asked = [
            (args.peer_key.is_some(), "--peer-key"),
            (args.allow.is_some(), "--allow"),
            (args.key.is_some(), "--key"),
        ];
        if let Some((_, flag)) = asked.iter().find(|(given, _)| *given) {
            return Err(Failure::Usage(format!(
                "{flag} does not apply to a profile on the UDT4 wire: it is not encrypted"
            )));
        }
        keys::SecurityArgs {
            insecure: true,
            ..args
        }
    };
    let s = keys::Security::from_args(args).map_err(|e| Failure::Usage(e.to_string()))?;
    if s.identity_created {
        if let (Some(path), Some(key)) = (&s.identity_path, s.public_key_text()) {
            eprintln!(
                "ctp: created this host's identity in {} (public key {key}; `ctp keygen --show` prints it)",
                path.display()
            );
        }
    }
    Ok(s)
}

/// Whether `profile` runs on the ctp wire (which marks the end of a stream), not UDT4's.
pub fn native_wire(profile: &ctp::Profile) -> bool {
    profile.wire() != ctp_proto::udt::WireFormat::Udt4
}

/// The endpoint options with the keys of `channel`: the identity to prove, the policy
/// that judges the peer's key, and (with `--insecure`) plaintext peers accepted.
pub fn with_channel(opts: ctp::EndpointOptions, channel: keys::Channel) -> ctp::EndpointOptions {
    ctp::EndpointOptions {
        identity: channel.identity,
        peer_policy: channel.policy,
        accept_insecure: channel.insecure,
        ..opts
    }
}

/// A fresh client endpoint for connecting to `addr`, bound to `bind` (any port by
/// default), proving and judging keys as `channel` says.
pub async fn client_endpoint(
    addr: SocketAddr,
    bind: Option<SocketAddr>,
    t: &TransportArgs,
    profile: &ctp::Profile,
    channel: keys::Channel,
) -> Result<Endpoint, Failure> {
    Ok(Endpoint::bind(
        bind.unwrap_or_else(|| unspecified_like(addr)),
        with_channel(endpoint_options(t, profile, false)?, channel),
    )
    .await
    .context("cannot open a UDP socket")?)
}

/// Connects `ep` to `addr` (or rendezvous with it), over `routes` when any are given
/// (`--path`: from a local address to `addr` or the peer address the route names).
pub async fn open_connection(
    ep: &Endpoint,
    addr: SocketAddr,
    rendezvous_with: bool,
    profile: &ctp::Profile,
    routes: &[crate::addr::Route],
) -> Result<Connection, Failure> {
    type Connecting = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Connection, ctp::ConnectError>> + Send>,
    >;
    let connecting: Connecting = if rendezvous_with {
        if !routes.is_empty() {
            return Err(Failure::Usage(
                "--path does not apply to a rendezvous (it has one path)".into(),
            ));
        }
        rendezvous(ep, addr, profile)
    } else if routes.is_empty() {
        Box::pin(ep.connect(addr, profile))
    } else {
        if let Some(r) = routes.iter().find(|r| r.local.is_ipv4() != addr.is_ipv4()) {
            return Err(Failure::Usage(format!(
                "--path {}: the local address and the peer's {addr} are of different families",
                r.local
            )));
        }
        let routes: Vec<_> = routes
            .iter()
            .map(|r| (r.local, r.remote.unwrap_or(addr)))
            .collect();
        Box::pin(ep.connect_over(&routes, profile))
    };
    Ok(connecting
        .await
        .map_err(|e| anyhow!("cannot connect to {addr}: {e}"))?)
}

/// A rendezvous connection with `peer` (only the `udt` profiles can rendezvous).
pub fn rendezvous(
    ep: &Endpoint,
    peer: SocketAddr,
    profile: &ctp::Profile,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Connection, ctp::ConnectError>> + Send>,
> {
    Box::pin(ep.connect_rendezvous(peer, profile))
}

/// `; public key KEY` for the line a listener starts with, if it has a key.
pub fn key_note(security: &keys::Security) -> String {
    security
        .public_key_text()
        .map(|k| format!("; public key {k}"))
        .unwrap_or_default()
}

pub fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    if addr.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    }
}

/// Resolves at Ctrl-C (SIGINT) or SIGTERM, with the signal's name for a message.
pub async fn interrupted() -> &'static str {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = term => "SIGTERM",
    }
}

/// Tells the person at a listener where it listens, with which profile and key (nothing
/// with `--json`): `ctp: {what}listening on ADDR (profile P; public key K)`.
pub fn announce_listening(ep: &Endpoint, what: &str, t: &TransportArgs, key_note: &str) {
    if !t.json {
        eprintln!(
            "ctp: {what}listening on {} (profile {}{key_note})",
            ep.local_addr().map(|x| x.to_string()).unwrap_or_default(),
            t.profile,
        );
    }
}

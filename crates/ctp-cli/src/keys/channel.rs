//! A command's keys as the handshake takes them: the identity this side proves and the
//! policy that judges the key its peer proves (the pin or first-use trust of a sender, the
//! allow list of a receiver).

use super::{encode_key, Security, Trust};
use std::sync::Mutex;

/// What the endpoint is given: who it is, how it judges its peers, whether it runs
/// without encryption.
pub struct Channel {
    /// The static key pair this side proves (`None` with `--insecure`).
    pub identity: Option<ctp::Identity>,
    /// Judges the peer's proven key.
    pub policy: ctp::PeerPolicy,
    /// `--insecure`: no encryption, and plaintext peers are accepted.
    pub insecure: bool,
}

impl Security {
    /// The handshake's view of these keys. The policy prints, on standard error, a
    /// receiver key trusted for the first time and a sender refused by the allow list
    /// (the sender itself is told only that its key is not allowed).
    pub fn channel(self) -> Channel {
        let identity = self.identity.clone();
        let insecure = self.insecure;
        let state = Mutex::new(self);
        let policy = ctp::PeerPolicy::new(move |peer| {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if peer.peer_initiated {
                return s.check_sender_key(&peer.key).map_err(|e| {
                    eprintln!("ctp: refused a sender at {}: {e}", peer.remote);
                    format!(
                        "key {} is not on the receiver's allow list",
                        encode_key(&peer.key)
                    )
                });
            }
            match s.check_receiver_key(&peer.key) {
                Ok(Trust::New) => {
                    let file = s
                        .known_peers
                        .as_ref()
                        .map(|k| format!(" in {}", k.path().display()))
                        .unwrap_or_default();
                    eprintln!(
                        "ctp: first connection to {}: its key {} is now remembered{file} \
                         (pin it with --peer-key to check it from the first time)",
                        s.peer.as_deref().unwrap_or("the receiver"),
                        encode_key(&peer.key)
                    );
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        });
        Channel {
            identity,
            policy,
            insecure,
        }
    }
}

//! `ctp keygen`: creates this host's identity, or shows its public key.
//!
//! The public key alone goes to stdout (so `KEY=$(ctp keygen --show)` works); what was
//! done and where goes to stderr, or everything as one JSON object with `--json`.

use crate::cli::KeygenArgs;
use crate::failure::Failure;
use crate::keys::{self, Identity, IdentityFile, KeyError, PRIVATE_FILE, PUBLIC_FILE};
use crate::output::outln;
use anyhow::anyhow;

/// Runs `ctp keygen`.
pub fn run(a: KeygenArgs) -> Result<(), Failure> {
    let dir = a
        .dir
        .clone()
        .or_else(keys::config_dir)
        .ok_or_else(|| Failure::Usage(KeyError::NoConfigDir.to_string()))?;
    let path = dir.join(PRIVATE_FILE);
    let failed = |e: KeyError| Failure::Transfer(anyhow!("{e}"));
    let (id, created) = if a.show {
        (Identity::load(&path).map_err(failed)?, false)
    } else {
        let id = Identity::random();
        let replaced = a.force && path.exists();
        id.save(&dir, a.force).map_err(failed)?;
        if !a.json {
            let pub_path = dir.join(PUBLIC_FILE);
            if replaced {
                eprintln!(
                    "ctp: replaced the identity in {} (public key in {}); peers that \
                     remembered the old key refuse this host until they delete its line in \
                     their known_peers, and pins of it (--peer-key) and allow lists (--allow) \
                     need the new key",
                    path.display(),
                    pub_path.display()
                );
            } else {
                eprintln!(
                    "ctp: created an identity in {} (private key, mode 0600; public key in \
                     {}); give the public key printed here to the peers that pin it \
                     (--peer-key) or allow it (--allow)",
                    path.display(),
                    pub_path.display()
                );
            }
        }
        (id, true)
    };
    let public_key = keys::encode_key(&id.public);
    if a.json {
        outln!(
            "{}",
            serde_json::json!({
                "public_key": public_key,
                "path": path.display().to_string(),
                "created": created,
            })
        );
    } else {
        outln!("{public_key}");
    }
    Ok(())
}

//! The server and clients of the `scp` and `rsync` peers: an `sshd` the bench starts itself
//! for each run, with its own configuration, host key and authorized key in the bench's
//! scratch directory; nothing of the machine's ssh set-up (`/etc/ssh`, `~/.ssh`) is read or
//! changed.
//!
//! The server runs in the foreground (`sshd -D -e -f CONFIG`) on the receiver's side (in the
//! receiver's namespace on a veth path), listening on the receiver's address and a free
//! port, as root (it changes to the logged-in user, root, for the session). The clients use
//! `aes128-gcm@openssh.com`, no compression, the run's key only, no known-hosts file and no
//! user configuration (`-F /dev/null`), in batch mode.

use super::paths::Place;
use super::programs::which;
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// The cipher of every ssh connection of the bench.
pub const CIPHER: &str = "aes128-gcm@openssh.com";

/// sshd's privilege-separation directory, which it refuses to start without.
const PRIVSEP_DIR: &str = "/run/sshd";

/// The bench's ssh set-up: the programs, the keys and a directory for the server's
/// configuration.
pub struct Ssh {
    dir: PathBuf,
    sshd: PathBuf,
    ssh: PathBuf,
    scp: PathBuf,
    /// The client's private key, whose public half is the server's only authorized key.
    key: PathBuf,
}

/// Where sshd is: on `PATH`, or in `/usr/sbin` (often not on a user's `PATH`).
fn find_sshd() -> Option<PathBuf> {
    which("sshd").or_else(|| {
        let p = PathBuf::from("/usr/sbin/sshd");
        p.is_file().then_some(p)
    })
}

/// Generates an ed25519 key pair without a passphrase at `path` (and `path.pub`).
async fn keygen(keygen: &Path, path: &Path) -> Result<(), String> {
    let status = Command::new(keygen)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "ctp-bench", "-f"])
        .arg(path)
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("failed: ssh-keygen: {e}"))?;
    if !status.success() {
        return Err(format!(
            "failed: ssh-keygen -f {} ({status})",
            path.display()
        ));
    }
    Ok(())
}

impl Ssh {
    /// Checks that the programs are installed and that this process may run sshd, creates
    /// sshd's privilege-separation directory if it is missing, and generates a host key and
    /// a client key under `dir`. The error is the row's status (`missing: …`).
    pub async fn prepare(dir: &Path) -> Result<Ssh, String> {
        let sshd =
            find_sshd().ok_or("missing: sshd not installed (apt-get install openssh-server)")?;
        let (Some(ssh), Some(scp), Some(ssh_keygen)) =
            (which("ssh"), which("scp"), which("ssh-keygen"))
        else {
            return Err(
                "missing: ssh, scp or ssh-keygen not installed (apt-get install openssh-client)"
                    .into(),
            );
        };
        if !super::paths::is_root() {
            return Err(
                "missing: the bench's own sshd runs as root (run the bench as root)".into(),
            );
        }
        if !Path::new(PRIVSEP_DIR).is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o755)
                .recursive(true)
                .create(PRIVSEP_DIR)
                .map_err(|e| format!("failed: creating sshd's {PRIVSEP_DIR}: {e}"))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("failed: {}: {e}", dir.display()))?;
        let key = dir.join("client_key");
        keygen(&ssh_keygen, &dir.join("host_key")).await?;
        keygen(&ssh_keygen, &key).await?;
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))
            .map_err(|e| format!("failed: writing authorized_keys: {e}"))?;
        Ok(Ssh {
            dir: dir.to_path_buf(),
            sshd,
            ssh,
            scp,
            key,
        })
    }

    /// The server's configuration for one run: listening on `ip:port` only.
    fn config(&self, ip: &str, port: &str) -> String {
        let d = self.dir.display();
        format!(
            "ListenAddress {ip}:{port}\n\
             HostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PidFile none\n\
             UsePAM no\n\
             UseDNS no\n\
             StrictModes no\n\
             PermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PrintMotd no\n\
             PrintLastLog no\n\
             X11Forwarding no\n\
             Subsystem sftp internal-sftp\n"
        )
    }

    /// The server of one run (`sshd -D -e -f CONFIG`) on the receiver's side of `place`,
    /// listening on `ip:port`. It serves until it is stopped.
    pub fn server(&self, place: Place<'_>, ip: &str, port: &str) -> Result<Command, String> {
        let config = self.dir.join("sshd_config");
        std::fs::write(&config, self.config(ip, port))
            .map_err(|e| format!("failed: writing {}: {e}", config.display()))?;
        let mut c = place.command(false, &self.sshd);
        c.args(["-D", "-e", "-f"]).arg(&config);
        Ok(c)
    }

    /// The client options shared by ssh, scp and rsync's ssh (the port flag differs).
    fn client_options(&self) -> Vec<String> {
        let mut o: Vec<String> = [
            "-F",
            "/dev/null",
            "-c",
            CIPHER,
            "-o",
            "Compression=no",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "IdentitiesOnly=yes",
            // A server still starting refuses the connection: try again, once a second.
            "-o",
            "ConnectionAttempts=5",
        ]
        .map(String::from)
        .to_vec();
        o.push("-i".into());
        o.push(self.key.display().to_string());
        o
    }

    /// `scp` of `source` into the directory `dest` on `ip:port`, on the sender's side.
    pub fn scp(
        &self,
        place: Place<'_>,
        source: &Path,
        ip: &str,
        port: &str,
        dest: &Path,
    ) -> Command {
        let mut c = place.command(true, &self.scp);
        c.args(self.client_options())
            .args(["-q", "-P", port])
            .arg(source)
            .arg(format!("{ip}:{}/", dest.display()));
        c
    }

    /// `rsync` of `source` into the directory `dest` on `ip:port` over this ssh (whole
    /// files, no compression), on the sender's side; `missing: …` if rsync is not installed.
    pub fn rsync(
        &self,
        place: Place<'_>,
        source: &Path,
        ip: &str,
        port: &str,
        dest: &Path,
    ) -> Result<Command, String> {
        let rsync = which("rsync").ok_or("missing: rsync not installed (apt-get install rsync)")?;
        // rsync splits `-e` at spaces and honours quotes.
        let quote = |s: &str| format!("'{s}'");
        let mut shell = vec![
            quote(&self.ssh.display().to_string()),
            "-p".into(),
            port.into(),
        ];
        shell.extend(self.client_options().iter().map(|o| quote(o)));
        let mut c = place.command(true, &rsync);
        c.args(["--whole-file", "-e", &shell.join(" ")])
            .arg(source)
            .arg(format!("{ip}:{}/", dest.display()));
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_listens_on_the_run_address_with_the_bench_keys_only() {
        let s = Ssh {
            dir: "/tmp/b/ssh".into(),
            sshd: "/usr/sbin/sshd".into(),
            ssh: "/usr/bin/ssh".into(),
            scp: "/usr/bin/scp".into(),
            key: "/tmp/b/ssh/client_key".into(),
        };
        let c = s.config("10.77.0.2", "4022");
        for line in [
            "ListenAddress 10.77.0.2:4022",
            "HostKey /tmp/b/ssh/host_key",
            "AuthorizedKeysFile /tmp/b/ssh/authorized_keys",
            "UsePAM no",
            "UseDNS no",
            "PasswordAuthentication no",
        ] {
            assert!(c.lines().any(|l| l == line), "{line} not in\n{c}");
        }
        let o = s.client_options();
        assert!(o.windows(2).any(|w| w == ["-c", CIPHER]), "{o:?}");
        assert!(o.windows(2).any(|w| w == ["-F", "/dev/null"]), "{o:?}");
        assert!(o.ends_with(&["-i".into(), "/tmp/b/ssh/client_key".into()]));
    }
}

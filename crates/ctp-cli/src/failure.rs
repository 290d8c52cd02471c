//! Why a command failed, and so its exit status.

/// Why a command failed; decides the exit status.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments or configuration (exit status 2).
    Usage(String),
    /// The transfer could not be completed (exit status 1).
    Transfer(anyhow::Error),
    /// Interrupted by the user (exit status 130).
    Interrupted,
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Transfer(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(m) => f.write_str(m),
            Failure::Transfer(e) => write!(f, "{e:#}"),
            Failure::Interrupted => f.write_str("interrupted"),
        }
    }
}

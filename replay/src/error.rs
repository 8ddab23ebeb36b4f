//! How a `trace-replay` command ends when it does not succeed, and the exit code each ending gives: one
//! [`Error`], so that the binary's `main` only prints it and exits with [`Error::exit_code`]. Scripts and
//! `trace-host process` tell the endings apart by their codes: 1 is a "no" (a re-run that differed, an
//! invalid bundle), 2 unusable input or environment, 3 no Chromium, 130 asked to stop.

/// A command's ending other than success.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A re-run that differed from the recording: the report says how.
    #[error("the re-run differed from the recording (see the report)")]
    Unfaithful,
    /// An audit found bundles (this many) whose checkpoints do not discriminate: the report says which.
    #[error("{0} bundle(s) failed their audit (see the report)")]
    Invalid(usize),
    /// The process was asked to stop (Ctrl+C, `SIGTERM`, `SIGHUP`) before its work was done.
    #[error("stopped before the work was done; the browsers it started are closed")]
    Stopped,
    /// There is no Chromium to run, told apart from a bundle's fault so that `trace-host process` skips
    /// its audit then.
    #[error("{0}")]
    NoBrowser(String),
    /// Anything else: the bundle, the arguments or the environment cannot be used. Printed with its whole
    /// chain of causes.
    #[error("{0:#}")]
    Unusable(anyhow::Error),
}

impl Error {
    /// The exit code the binary ends with.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Unfaithful | Error::Invalid(_) => 1,
            Error::Unusable(_) => 2,
            Error::NoBrowser(_) => 3,
            Error::Stopped => 130,
        }
    }
}

impl From<anyhow::Error> for Error {
    /// An ending carried inside an `anyhow` error (through a library call that returns one) keeps its
    /// exit code; any other error is [`Error::Unusable`].
    fn from(error: anyhow::Error) -> Error {
        error.downcast::<Error>().unwrap_or_else(Error::Unusable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ending_keeps_its_exit_code_and_message() {
        let cases: [(Error, u8, &str); 5] = [
            (Error::Unfaithful, 1, "the re-run differed from the recording (see the report)"),
            (Error::Invalid(2), 1, "2 bundle(s) failed their audit (see the report)"),
            (Error::Stopped, 130, "stopped before the work was done; the browsers it started are closed"),
            (Error::NoBrowser("Chromium is not at x".to_owned()), 3, "Chromium is not at x"),
            (anyhow::anyhow!("the cause").context("cannot open y").into(), 2, "cannot open y: the cause"),
        ];
        for (error, code, message) in cases {
            assert_eq!((error.exit_code(), error.to_string()), (code, message.to_owned()));
        }
    }

    #[test]
    fn an_ending_inside_an_anyhow_error_keeps_its_code() {
        let error = Error::from(anyhow::Error::from(Error::Stopped));
        assert_eq!(error.exit_code(), 130);
    }
}

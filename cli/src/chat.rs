//! `agcore chat`: an interactive session.

use std::process::ExitCode;

use crate::cli::ChatArgs;

/// Run `agcore chat`.
pub async fn chat(_args: ChatArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("agcore chat is not built yet")
}

//! `agcore restate serve`: the agent of the usual model and tool flags and `agcore.toml`
//! (model, provider, tools, MCP servers, gates), served as a Restate endpoint
//! ([`agcore_restate`]). A call that needs approval waits for the `approve` handler (with
//! `--yes`, it runs). `agcore restate register`: the endpoint registered with Restate.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agcore::tools::DeferAll;

use crate::cli::{RestateRegisterArgs, RestateServeArgs};
use crate::layers::Loaded;
use crate::secrets::Secrets;
use crate::setup::{build_cycle, build_registry_with_mcp};

/// Run `agcore restate serve` until Ctrl-C or SIGTERM.
pub async fn serve(
    args: RestateServeArgs,
    loaded: Loaded,
    secrets: &Secrets,
) -> anyhow::Result<ExitCode> {
    let mut access = agcore_restate::Access::unverified();
    for key in args
        .identity_key
        .iter()
        .chain(&loaded.config.restate.identity_keys)
    {
        access = access.identity_key(key)?;
    }
    // Checked before anything starts: an endpoint anyone can reach would run the agent with
    // the operator's model key for anyone.
    if access.check(args.bind).is_err() {
        anyhow::bail!(
            "refusing to serve {} without --identity-key: it is not a loopback address, and \
             the endpoint would run the agent for anyone who reaches it. Give Restate's request \
             identity public key (--identity-key publickeyv1_…, or restate.identity_keys in \
             agcore.toml), or bind 127.0.0.1",
            args.bind
        );
    }
    // Bound first: a busy or foreign address fails at once, before MCP servers start.
    let listener = agcore_restate::bind(args.bind).await?;
    let cycle = build_cycle(&args.model, &loaded.config, secrets)?;
    let (registry, _statuses, servers) =
        build_registry_with_mcp(&args.tools, Some(&args.model), &loaded, true).await?;
    let registry = if args.tools.yes {
        registry
    } else {
        registry.with_approver(Arc::new(DeferAll))
    };
    let agent = agcore_restate::Agent::new(cycle, registry);
    let address = listener.local_addr()?;
    eprintln!(
        "agcore restate endpoint on http://{address} (HTTP/2 cleartext); register it with \
         Restate: agcore restate register --admin http://RESTATE:9070 --endpoint http://{address}"
    );
    // Said once, so an operator sees from the log whether requests are verified.
    if access.is_verified() {
        eprintln!(
            "requests are verified: only those Restate signed with an identity key are served"
        );
    } else {
        eprintln!(
            "requests are NOT verified (no --identity-key): anyone who can connect to \
             {address} can run the agent"
        );
    }
    agcore_restate::serve(listener, agent, access, shutdown()).await?;
    crate::mcp_close::close_servers(&servers).await;
    Ok(ExitCode::SUCCESS)
}

/// Run `agcore restate register`: print the deployment and its services.
pub async fn register(args: RestateRegisterArgs) -> anyhow::Result<ExitCode> {
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|timeout| !timeout.is_zero())
        .ok_or_else(|| anyhow::anyhow!("--timeout takes a positive number of seconds"))?;
    let registered =
        agcore_restate::register(&args.admin, &args.endpoint, args.force, timeout).await?;
    println!(
        "registered {} as deployment {}",
        agcore::display::escape_for_terminal(&args.endpoint),
        registered.id
    );
    for service in &registered.services {
        println!(
            "  {} ({}): {}",
            service.name,
            service.kind,
            service.handlers.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

//! The spec's resource limits, set with `setrlimit` (soft and hard alike, so the command
//! cannot raise them again) after the helper entered its user namespace: `RLIMIT_NPROC` then
//! counts the processes of that namespace only. A limit the kernel refuses is an error: the
//! command is not run without it.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::tools::sandbox::limits::SandboxLimits;

pub(crate) fn apply(limits: &SandboxLimits) -> Result<(), String> {
    for (resource, value, name) in [
        (
            Resource::RLIMIT_NPROC,
            limits.max_processes,
            "processes (RLIMIT_NPROC)",
        ),
        (
            Resource::RLIMIT_FSIZE,
            limits.max_file_size,
            "file size (RLIMIT_FSIZE)",
        ),
        (
            Resource::RLIMIT_AS,
            limits.max_address_space,
            "address space (RLIMIT_AS)",
        ),
        (Resource::RLIMIT_CPU, limits.max_cpu_secs, "CPU time (RLIMIT_CPU)"),
    ] {
        if value == 0 {
            continue;
        }
        let failed = |error: nix::Error| format!("the limit on {name} could not be set: {error}");
        // Never above what is already in force (an unprivileged process cannot raise it).
        let (_, hard) = getrlimit(resource).map_err(failed)?;
        let value = value.min(hard);
        setrlimit(resource, value, value).map_err(failed)?;
    }
    Ok(())
}

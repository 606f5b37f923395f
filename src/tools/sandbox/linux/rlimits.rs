//! The spec's resource limits, set with `setrlimit` (soft and hard alike, so the command
//! cannot raise them again) after the helper entered its user namespace: `RLIMIT_NPROC` then
//! counts the processes of that namespace only. A limit the kernel refuses is an error: the
//! command is not run without it. Linux exempts root (uid 0) from `RLIMIT_NPROC`: for root
//! the default process limit is left out, and one asked for explicitly refuses to run.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::tools::sandbox::limits::{DEFAULT_MAX_PROCESSES, SandboxLimits};

pub(crate) fn apply(limits: &SandboxLimits) -> Result<(), String> {
    let root = nix::unistd::getuid().is_root();
    let processes = match limits.max_processes {
        Some(count) if count > 0 && root => {
            return Err(format!(
                "a limit of {count} processes cannot be enforced for root (Linux exempts uid 0 \
                 from RLIMIT_NPROC): run agcore as another user, or set \
                 `limits.max_processes = 0` knowingly"
            ));
        }
        Some(count) => count,
        None if root => 0,
        None => DEFAULT_MAX_PROCESSES,
    };
    for (resource, value, name) in [
        (
            Resource::RLIMIT_NPROC,
            processes,
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
        (
            Resource::RLIMIT_CPU,
            limits.max_cpu_secs,
            "CPU time (RLIMIT_CPU)",
        ),
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

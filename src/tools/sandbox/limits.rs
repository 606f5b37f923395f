//! [`SandboxLimits`]: resource limits (`setrlimit`) a sandboxed command and every process it
//! starts inherit, so one command cannot fork-bomb the machine or fill the disk with one file.
//! Set by the helper after it entered its user namespace: the process count is then the
//! sandbox's own, and the limits cannot be raised again from inside.

use serde::{Deserialize, Serialize};

/// Default [`SandboxLimits::max_processes`]: ample for a parallel build (threads count too).
pub const DEFAULT_MAX_PROCESSES: u64 = 4096;
/// Default [`SandboxLimits::max_file_size`]: 16 GiB, above any ordinary build artifact.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 16 * 1024 * 1024 * 1024;

/// Resource limits of a sandboxed command, each inherited by every process it starts. `0`
/// means no limit.
///
/// Linux does not apply `RLIMIT_NPROC` to root (uid 0): for root the default process limit
/// is left out, and one set explicitly refuses to run (it cannot be enforced).
///
/// ```toml
/// [tools.sandbox.limits]
/// max_processes = 4096           # processes and threads at once (RLIMIT_NPROC; not for root)
/// max_file_size = 17179869184    # bytes one file may grow to (RLIMIT_FSIZE)
/// max_address_space = 0          # bytes of virtual memory per process (RLIMIT_AS)
/// max_cpu_secs = 0               # CPU seconds per process (RLIMIT_CPU)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxLimits {
    /// Processes and threads the sandbox may run at once (counted in its own user namespace,
    /// not against the user's other processes). `None`: [`DEFAULT_MAX_PROCESSES`] where the
    /// kernel enforces it (not for root); a number given for root refuses to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
    /// The size, in bytes, a process may make a file grow to; beyond it the write fails
    /// (`EFBIG`, the process gets `SIGXFSZ`). Default [`DEFAULT_MAX_FILE_SIZE`].
    pub max_file_size: u64,
    /// Virtual memory per process, in bytes. Default none: runtimes that reserve large
    /// address ranges (JVMs, Node, Go) fail under a low one, and it does not bound the sum.
    pub max_address_space: u64,
    /// CPU time per process, in seconds (`SIGXCPU`, then `SIGKILL`). Default none: the
    /// calling tool's timeout bounds wall time.
    pub max_cpu_secs: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            max_processes: None,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_address_space: 0,
            max_cpu_secs: 0,
        }
    }
}

impl SandboxLimits {
    /// No limits at all.
    pub fn none() -> Self {
        SandboxLimits {
            max_processes: Some(0),
            max_file_size: 0,
            max_address_space: 0,
            max_cpu_secs: 0,
        }
    }

    /// These limits with at most `count` processes and threads.
    pub fn with_max_processes(mut self, count: u64) -> Self {
        self.max_processes = Some(count);
        self
    }

    /// These limits with files of at most `bytes`.
    pub fn with_max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes;
        self
    }

    /// These limits with at most `bytes` of virtual memory per process.
    pub fn with_max_address_space(mut self, bytes: u64) -> Self {
        self.max_address_space = bytes;
        self
    }

    /// These limits with at most `secs` CPU seconds per process.
    pub fn with_max_cpu_secs(mut self, secs: u64) -> Self {
        self.max_cpu_secs = secs;
        self
    }

    pub(crate) fn is_default(&self) -> bool {
        *self == SandboxLimits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_with_defaults_for_what_is_not_given() {
        let limits: SandboxLimits = serde_json::from_str(r#"{"max_processes": 64}"#).unwrap();
        assert_eq!(limits.max_processes, Some(64));
        assert_eq!(limits.max_file_size, DEFAULT_MAX_FILE_SIZE);
        assert!(serde_json::from_str::<SandboxLimits>(r#"{"max_procs": 1}"#).is_err());
    }
}

//! Landlock: read (and execute) everywhere, write only under the spec's writable roots and a
//! few device files; with ABI 4+ TCP bind/connect off too when the network is off; with ABI 6+
//! no signals to and no abstract Unix sockets of processes outside the sandbox.

use landlock::Ruleset;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::tools::sandbox::policy::NetworkAccess;
use crate::tools::sandbox::probe::MIN_LANDLOCK_ABI;
use crate::tools::sandbox::spec::SandboxSpec;

/// The file-system ABI the rules are written for (and required).
const FS_ABI: ABI = ABI::V3;

/// Device files every program expects to write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
];

pub(crate) fn kernel_abi() -> Option<u32> {
    // The crate hides the version query on purpose; creating a ruleset that requires an ABI
    // (without applying it) tells whether the kernel has it.
    let has = |abi: ABI| {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|ruleset| ruleset.create())
            .is_ok()
    };
    let known = [
        ABI::V1,
        ABI::V2,
        ABI::V3,
        ABI::V4,
        ABI::V5,
        ABI::V6,
        ABI::V7,
    ];
    let mut found = None;
    for (version, abi) in (1u32..).zip(known) {
        if !has(abi) {
            break;
        }
        found = Some(version);
    }
    found
}

pub(crate) fn restrict(spec: &SandboxSpec) -> Result<(), String> {
    let failed = |error: landlock::RulesetError| {
        format!(
            "Landlock ABI {MIN_LANDLOCK_ABI} or later is needed and could not be applied: {error}"
        )
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FS_ABI))
        .map_err(failed)?
        // Newer layers where the kernel has them: the namespaces and seccomp already cover them.
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(ABI::V6))
        .map_err(failed)?;
    if let Some(_port) = spec.proxy_port {
        // The allow-list's only wall between the command and the host's network: required.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(failed)?;
    } else if spec.network == NetworkAccess::Off {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(failed)?;
    }
    let devices: Vec<&str> = DEVICES
        .iter()
        .copied()
        .filter(|device| std::path::Path::new(device).exists())
        .collect();
    let mut created = ruleset.create().map_err(failed)?;
    if let Some(port) = spec.proxy_port {
        // TCP connections to the proxy's port only; no bind at all.
        created = created
            .set_compatibility(CompatLevel::HardRequirement)
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(failed)?;
    }
    let status = created
        .set_compatibility(CompatLevel::HardRequirement)
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))
        .map_err(failed)?
        .add_rules(path_beneath_rules(
            &spec.writable,
            AccessFs::from_all(FS_ABI),
        ))
        .map_err(failed)?
        .add_rules(path_beneath_rules(devices, AccessFs::from_file(FS_ABI)))
        .map_err(failed)?
        .restrict_self()
        .map_err(failed)?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(format!(
            "Landlock was not enforced by this kernel (status {:?})",
            status.ruleset
        ));
    }
    Ok(())
}

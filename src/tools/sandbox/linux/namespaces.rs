//! A new user namespace (mapping the user to itself), a mount namespace in it, and — with the
//! network off — a network namespace: no interface but a loopback that is down, so neither
//! the internet nor 127.0.0.1 / ::1 nor abstract Unix sockets of the host are reachable.
//! In the mount namespace, hidden paths get an empty read-only tmpfs (a file: `/dev/null`)
//! mounted over them, and read-only paths inside the workspace a read-only bind mount.

use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{getgid, getuid};

use crate::tools::sandbox::policy::NetworkAccess;
use crate::tools::sandbox::spec::SandboxSpec;

pub(crate) fn enter(spec: &SandboxSpec) -> Result<(), String> {
    let (uid, gid) = (getuid(), getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    // With an allow-list the proxy on the host's loopback must stay reachable: Landlock and
    // seccomp confine the network instead of an empty namespace.
    if spec.network == NetworkAccess::Off && spec.proxy_port.is_none() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|error| {
        format!("user/mount/network namespaces could not be created (unshare: {error})")
    })?;
    // The user stays itself inside (files keep their owners; no new rights outside).
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    // Nothing mounted here propagates back to the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|error| format!("the mount namespace could not be made private: {error}"))?;
    for path in &spec.hidden {
        hide(path)?;
    }
    for path in &spec.read_only {
        bind_read_only(path)?;
    }
    Ok(())
}

fn write_proc(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|error| format!("{path} could not be written: {error}"))
}

fn hide(path: &Path) -> Result<(), String> {
    let Ok(metadata) = std::fs::metadata(path) else {
        return Ok(()); // gone since the parent looked: nothing to hide
    };
    let result = if metadata.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,mode=0500"),
        )
    } else {
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
    };
    result.map_err(|error| format!("{} could not be hidden: {error}", path.display()))
}

fn bind_read_only(path: &Path) -> Result<(), String> {
    let failed =
        |error: nix::Error| format!("{} could not be made read-only: {error}", path.display());
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(failed)?;
    // A remount in a user namespace must keep the flags the original mount locked.
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    let current = statvfs(path).map_err(failed)?.flags();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(fs) {
            flags |= ms;
        }
    }
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>).map_err(failed)
}

//! Every process a `run_command` command started, found and killed — also those that left its
//! process group (`setsid`, a double fork) and were re-parented to init.
//!
//! A process belongs to a command when (Linux, from `/proc`) it is in the command's process
//! group, carries the command's marker in its environment ([`MARKER_ENV`], inherited by every
//! descendant that does not clear its environment), holds one of the command's output pipes,
//! or descends from such a process (agcore's own direct children count only by group and
//! descent: between its fork and exec, a child holds copies of every pipe agcore has open).
//! All of them are stopped first (`SIGSTOP`: a stopped process
//! cannot fork or exit, so the parent links stay intact while the tree is collected), then
//! killed. Elsewhere only the process group is killed.
//!
//! Limit: a descendant that clears its environment, closes the pipes, leaves the group and is
//! orphaned is not found; only a sandbox (a PID namespace or a cgroup) catches that.
//! `PR_SET_CHILD_SUBREAPER` is not used: it is process-wide, and would make the host
//! application reap the orphans of every child it has, agcore's or not.

use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that marks a command's processes.
pub(crate) const MARKER_ENV: &str = "AGCORE_RUN_COMMAND_ID";

/// A new marker, unique in this process (and across processes, by the pid).
pub(crate) fn new_marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// What identifies one command's processes.
#[derive(Debug, Clone)]
pub(crate) struct CommandTree {
    /// The shell's pid, which is also its process group's id.
    pub(crate) leader: i32,
    /// The value of [`MARKER_ENV`] in the command's environment.
    pub(crate) marker: String,
    /// The `/proc/PID/fd` link texts of the command's output pipes (`pipe:[123]`).
    pub(crate) pipes: Vec<String>,
}

impl CommandTree {
    /// Kill every process of the command (blocking: reads `/proc`, waits a few milliseconds
    /// between rounds). Safe to call more than once.
    pub(crate) fn kill_all(&self) {
        #[cfg(unix)]
        {
            use nix::sys::signal::{Signal, killpg};
            use nix::unistd::Pid;
            // ESRCH (the group is gone) is the normal case after a clean exit.
            let _ = killpg(Pid::from_raw(self.leader), Signal::SIGKILL);
        }
        #[cfg(target_os = "linux")]
        linux::kill_tree(self);
    }
}

/// The `/proc/self/fd` link text of `fd`, e.g. `pipe:[123]`.
#[cfg(target_os = "linux")]
pub(crate) fn fd_link(fd: &impl std::os::fd::AsRawFd) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .map(|target| target.to_string_lossy().into_owned())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    use super::{CommandTree, MARKER_ENV};

    /// How many rounds of collecting (and of killing stragglers) at most.
    const ROUNDS: usize = 20;

    /// One live (not zombie) process.
    struct Proc {
        ppid: i32,
        pgrp: i32,
    }

    pub(super) fn kill_tree(tree: &CommandTree) {
        let needle = format!("{MARKER_ENV}={}", tree.marker);
        let mut members: HashSet<i32> = HashSet::new();
        // Stop everything found until no new member appears.
        for _ in 0..ROUNDS {
            let found = members_now(tree, &needle, &members);
            let new: Vec<i32> = found.difference(&members).copied().collect();
            if new.is_empty() {
                break;
            }
            for pid in new {
                let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                members.insert(pid);
            }
        }
        for &pid in &members {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        // Anything still alive and still marked (forked between a scan and its stop).
        for _ in 0..ROUNDS {
            let left = members_now(tree, &needle, &HashSet::new());
            if left.is_empty() {
                break;
            }
            for pid in left {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The live processes of the command now: marked ones and the descendants of marked ones
    /// and of `known`.
    fn members_now(tree: &CommandTree, needle: &str, known: &HashSet<i32>) -> HashSet<i32> {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let procs = live_processes();
        let mut members: HashSet<i32> = procs
            .iter()
            .filter(|&(&pid, proc)| {
                pid != me
                    && (known.contains(&pid)
                        || pid == tree.leader
                        || proc.pgrp == tree.leader
                        // Not our own children: between fork and exec, a command being
                        // started by another call holds copies of all our pipes.
                        || (proc.ppid != me
                            && (has_marker(pid, needle) || holds_pipe(pid, &tree.pipes))))
            })
            .map(|(&pid, _)| pid)
            .collect();
        // Descendants, to a fixed point.
        loop {
            let before = members.len();
            for (&pid, proc) in &procs {
                if pid != me && members.contains(&proc.ppid) {
                    members.insert(pid);
                }
            }
            if members.len() == before {
                return members;
            }
        }
    }

    fn live_processes() -> HashMap<i32, Proc> {
        let mut procs = HashMap::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return procs;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let (Some(state), Some(ppid), Some(pgrp)) = (
                fields.first(),
                fields.get(1).and_then(|f| f.parse().ok()),
                fields.get(2).and_then(|f| f.parse().ok()),
            ) else {
                continue;
            };
            if *state != "Z" && *state != "X" {
                procs.insert(pid, Proc { ppid, pgrp });
            }
        }
        procs
    }

    fn has_marker(pid: i32, needle: &str) -> bool {
        std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
            environ
                .split(|&byte| byte == 0)
                .any(|entry| entry == needle.as_bytes())
        })
    }

    fn holds_pipe(pid: i32, pipes: &[String]) -> bool {
        if pipes.is_empty() {
            return false;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| pipes.iter().any(|pipe| target.as_os_str() == pipe.as_str()))
        })
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn markers_are_unique() {
        assert_ne!(new_marker(), new_marker());
    }

    #[test]
    fn a_marked_orphan_is_killed() {
        let marker = new_marker();
        // A marked process in its own session, orphaned (re-parented to init): found only by
        // its marker.
        let output = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 >/dev/null 2>&1 & echo $!"])
            .env(MARKER_ENV, &marker)
            .output()
            .unwrap();
        let pid: u32 = String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
        };
        assert!(alive(), "the orphan {pid} is not running");
        let tree = CommandTree {
            leader: i32::MAX,
            marker,
            pipes: Vec::new(),
        };
        tree.kill_all();
        for _ in 0..100 {
            if !alive() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the marked orphan {pid} survived");
    }
}

//! The OS sandbox of `run_command` (issue 34), through the real tool, helper and kernel: what a
//! command cannot write, read or reach under each policy, that the whole process tree is
//! confined, that restricted mode wins over the config, and that a kernel without Landlock
//! refuses instead of running unsandboxed.
//!
//! Every test here fails with the sandbox off: set `AGCORE_DISABLE_SANDBOX_IN_TESTS=1` and
//! [`sandbox`] hands out `full` (no sandbox) instead of the policy asked for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agcore::tools::Tool;
use agcore::tools::builtin::{RunCommand, RunCommandInput, RunCommandOutput, Workspace};
use agcore::tools::sandbox::{
    FixedProbe, NetworkAccess, Sandbox, SandboxLimits, SandboxPolicy, SandboxSupport,
};

/// `policy` as a sandbox with `home` as `~` — or no sandbox at all when
/// `AGCORE_DISABLE_SANDBOX_IN_TESTS` is set, to watch these tests fail without it.
pub(crate) fn sandbox(policy: SandboxPolicy, home: &Path) -> Sandbox {
    let policy = if std::env::var_os("AGCORE_DISABLE_SANDBOX_IN_TESTS").is_some() {
        SandboxPolicy::full()
    } else {
        policy
    };
    Sandbox::new(policy).with_home(home)
}

/// A workspace, a directory beside it (outside), and a home directory.
struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let (workspace, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
        for dir in [&workspace, &outside, &home] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(outside.join("victim.txt"), "original\n").unwrap();
        Fixture {
            _root: root,
            workspace,
            outside,
            home,
        }
    }

    fn tool(&self, policy: SandboxPolicy) -> RunCommand {
        RunCommand::new(Workspace::new(&self.workspace).unwrap())
            .with_sandbox(sandbox(policy, &self.home))
    }

    fn victim(&self) -> String {
        std::fs::read_to_string(self.outside.join("victim.txt")).unwrap()
    }
}

pub(crate) async fn run(tool: &RunCommand, command: &str) -> RunCommandOutput {
    tool.run(input(command)).await.unwrap()
}

fn input(command: &str) -> RunCommandInput {
    serde_json::from_value(serde_json::json!({"command": command, "timeout_secs": 60})).unwrap()
}

#[tokio::test]
async fn workspace_write_keeps_every_write_inside_the_workspace() {
    let fixture = Fixture::new();
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    let out = fixture.outside.display().to_string();
    // Writing in the workspace and the private TMPDIR works.
    let inside = run(
        &tool,
        "echo ok > inside.txt && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert_eq!(inside.exit_code, Some(0), "{inside:?}");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("inside.txt")).unwrap(),
        "ok\n"
    );
    let attempts = [
        ("a direct path", format!("echo x > {out}/direct.txt")),
        ("..", "echo x > ../outside/dotdot.txt".to_owned()),
        (
            "a symlink pointing out",
            format!("ln -s {out} link && echo x > link/symlinked.txt"),
        ),
        (
            "a hard link it creates",
            format!("ln {out}/victim.txt hard && echo pwned >> hard"),
        ),
        (
            "/proc/self/root",
            format!("echo x > /proc/self/root{out}/proc-root.txt"),
        ),
        (
            "/proc/self/cwd/..",
            "echo x > /proc/self/cwd/../outside/proc-cwd.txt".to_owned(),
        ),
        (
            "a renamed directory",
            format!("mkdir moved && mv moved {out}/moved"),
        ),
        ("truncate", format!("truncate -s 0 {out}/victim.txt")),
        ("append", format!("echo pwned >> {out}/victim.txt")),
    ];
    for (how, command) in attempts {
        let output = run(&tool, &command).await;
        assert_ne!(output.exit_code, Some(0), "{how}: {output:?}");
    }
    let mut left: Vec<String> = std::fs::read_dir(&fixture.outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["victim.txt"], "files appeared outside the workspace");
    assert_eq!(fixture.victim(), "original\n");
}

#[tokio::test]
async fn the_git_directory_and_agcore_config_stay_read_only() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.workspace.join(".git")).unwrap();
    std::fs::write(fixture.workspace.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(fixture.workspace.join("agcore.toml"), "[tools]\n").unwrap();
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    for command in [
        "echo x >> .git/config",
        "touch .git/hooks-pre-commit",
        "echo x >> agcore.toml",
    ] {
        let output = run(&tool, command).await;
        assert_ne!(output.exit_code, Some(0), "{command}: {output:?}");
    }
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("agcore.toml")).unwrap(),
        "[tools]\n"
    );
    assert!(!fixture.workspace.join(".git/hooks-pre-commit").exists());
    // The rest of the workspace is writable.
    assert_eq!(run(&tool, "echo y > src.txt").await.exit_code, Some(0));
}

#[tokio::test]
async fn a_sandboxed_command_cannot_read_ssh_keys_of_its_home() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.home.join(".ssh")).unwrap();
    std::fs::write(fixture.home.join(".ssh/id_ed25519"), "PRIVATE KEY BYTES\n").unwrap();
    std::fs::write(fixture.home.join("notes.txt"), "readable\n").unwrap();
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    let home = fixture.home.display();
    let output = run(
        &tool,
        &format!("cat {home}/notes.txt; cat {home}/.ssh/id_ed25519; cat {home}/.ssh/id_*"),
    )
    .await;
    assert!(output.stdout.contains("readable"), "{output:?}");
    assert!(!output.stdout.contains("PRIVATE KEY"), "{output:?}");
}

/// A Python one-liner that connects to `target` (`tcp4`, `tcp6` or `unix`) and prints
/// `connected`.
fn connect(kind: &str, target: &str) -> String {
    let (family, address) = match kind {
        "tcp4" => ("AF_INET", target.to_owned()),
        "tcp6" => ("AF_INET6", target.to_owned()),
        _ => ("AF_UNIX", format!("'{target}'")),
    };
    format!(
        "python3 -c \"import socket; s = socket.socket(socket.{family}); s.settimeout(5); \
         s.connect({address}); print('connected')\""
    )
}

/// Loopback listeners (IPv4, IPv6, a Unix socket outside the workspace) and the commands that
/// connect to each.
struct Listeners {
    tcp4: TcpListener,
    tcp6: TcpListener,
    unix: UnixListener,
    commands: Vec<(&'static str, String)>,
}

impl Listeners {
    fn new(fixture: &Fixture) -> Self {
        let tcp4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp6 = TcpListener::bind("[::1]:0").unwrap();
        let socket = fixture.outside.join("agent.sock");
        let unix = UnixListener::bind(&socket).unwrap();
        let commands = vec![
            (
                "127.0.0.1",
                connect(
                    "tcp4",
                    &format!("('127.0.0.1', {})", tcp4.local_addr().unwrap().port()),
                ),
            ),
            (
                "::1",
                connect(
                    "tcp6",
                    &format!("('::1', {})", tcp6.local_addr().unwrap().port()),
                ),
            ),
            (
                "a Unix socket outside",
                connect("unix", &socket.display().to_string()),
            ),
        ];
        for listener in [&tcp4, &tcp6] {
            listener.set_nonblocking(true).unwrap();
        }
        unix.set_nonblocking(true).unwrap();
        Listeners {
            tcp4,
            tcp6,
            unix,
            commands,
        }
    }

    /// How many connections reached the listeners.
    fn accepted(&self) -> usize {
        let mut count = 0;
        while self.tcp4.accept().is_ok() {
            count += 1;
        }
        while self.tcp6.accept().is_ok() {
            count += 1;
        }
        while self.unix.accept().is_ok() {
            count += 1;
        }
        count
    }
}

#[tokio::test]
async fn with_the_network_off_nothing_is_reachable_not_even_loopback() {
    let fixture = Fixture::new();
    let listeners = Listeners::new(&fixture);
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    for (what, command) in &listeners.commands {
        let output = run(&tool, command).await;
        assert!(!output.stdout.contains("connected"), "{what}: {output:?}");
        assert_ne!(output.exit_code, Some(0), "{what}: {output:?}");
    }
    assert_eq!(listeners.accepted(), 0);
}

#[tokio::test]
async fn with_the_network_on_loopback_and_unix_sockets_are_reachable() {
    let fixture = Fixture::new();
    let listeners = Listeners::new(&fixture);
    let tool = fixture.tool(SandboxPolicy::workspace_write().with_network(NetworkAccess::On));
    for (what, command) in &listeners.commands {
        let output = run(&tool, command).await;
        assert_eq!(output.stdout, "connected\n", "{what}: {output:?}");
    }
    assert_eq!(listeners.accepted(), 3);
    // Still no writes outside.
    let output = run(
        &tool,
        &format!("echo x > {}/net-on.txt", fixture.outside.display()),
    )
    .await;
    assert_ne!(output.exit_code, Some(0), "{output:?}");
}

#[tokio::test]
async fn a_double_forked_child_is_still_confined() {
    let fixture = Fixture::new();
    let listeners = Listeners::new(&fixture);
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    let out = fixture.outside.display();
    let (_, connect_command) = &listeners.commands[0];
    // The grandchild leaves the session and the group, is orphaned, then tries; the shell waits
    // (within the call's timeout) until it has tried, so the tree kill does not pre-empt it.
    std::fs::write(
        fixture.workspace.join("child.sh"),
        format!("echo x > {out}/escaped.txt\n{connect_command} > conn.txt 2>&1\ntouch tried\n"),
    )
    .unwrap();
    let command = "(setsid sh child.sh &) ; \
                   for i in $(seq 400); do [ -e tried ] && break; sleep 0.05; done";
    let output = run(&tool, command).await;
    assert_eq!(output.exit_code, Some(0), "{output:?}");
    assert!(fixture.workspace.join("tried").exists());
    assert!(
        !fixture.outside.join("escaped.txt").exists(),
        "the grandchild wrote outside"
    );
    let connection = std::fs::read_to_string(fixture.workspace.join("conn.txt")).unwrap();
    assert!(!connection.contains("connected"), "{connection}");
    assert_eq!(listeners.accepted(), 0);
}

#[tokio::test]
async fn read_only_writes_nowhere_but_its_temp_dir() {
    let fixture = Fixture::new();
    let tool = fixture.tool(SandboxPolicy::read_only());
    let output = run(&tool, "echo x > inside.txt").await;
    assert_ne!(output.exit_code, Some(0), "{output:?}");
    assert!(!fixture.workspace.join("inside.txt").exists());
    let output = run(&tool, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
    assert_eq!(output.stdout, "t\n", "{output:?}");
}

#[tokio::test]
async fn restricted_mode_refuses_writes_and_connections_the_config_allows() {
    let fixture = Fixture::new();
    let listeners = Listeners::new(&fixture);
    let configured = SandboxPolicy::workspace_write()
        .with_network(NetworkAccess::On)
        .restricted(true);
    let tool = fixture.tool(configured);
    let output = run(&tool, "echo x > inside.txt").await;
    assert_ne!(output.exit_code, Some(0), "{output:?}");
    assert!(!fixture.workspace.join("inside.txt").exists());
    let (_, connect_command) = &listeners.commands[0];
    let output = run(&tool, connect_command).await;
    assert!(!output.stdout.contains("connected"), "{output:?}");
    assert_eq!(listeners.accepted(), 0);
}

#[tokio::test]
async fn a_kernel_without_landlock_refuses_to_run_and_says_why() {
    let fixture = Fixture::new();
    let no_landlock = Arc::new(FixedProbe(SandboxSupport {
        landlock_abi: None,
        user_namespaces: true,
        seccomp: true,
    }));
    let tool = RunCommand::new(Workspace::new(&fixture.workspace).unwrap()).with_sandbox(
        sandbox(SandboxPolicy::workspace_write(), &fixture.home).with_probe(no_landlock),
    );
    let error = tool
        .run(input("touch ran.txt"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        !fixture.workspace.join("ran.txt").exists(),
        "it ran: {error}"
    );
    assert!(error.contains("Landlock"), "{error}");
    assert!(error.contains("mode = \"full\""), "{error}");
}

#[tokio::test]
async fn a_blocked_write_tells_the_model_it_was_the_sandbox() {
    let fixture = Fixture::new();
    let tool = fixture.tool(SandboxPolicy::workspace_write());
    let output = run(
        &tool,
        &format!("echo x > {}/x.txt", fixture.outside.display()),
    )
    .await;
    let text = RunCommand::model_content(&output);
    assert!(text.contains("blocked by the sandbox"), "{text}");
}

/// Whether the tests run as root (Linux exempts uid 0 from the process limit).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

#[tokio::test]
async fn resource_limits_bound_processes_and_file_size() {
    let fixture = Fixture::new();
    let size_only = SandboxLimits::default().with_max_file_size(1024 * 1024);
    let tool = fixture.tool(SandboxPolicy::workspace_write().with_limits(size_only));
    // The limit is in force, for the command and what it starts, and a file stops growing at it.
    let limit = "python3 -c 'import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE))'";
    let output = run(&tool, &format!("{limit}; sh -c \"{limit}\"")).await;
    assert_eq!(
        output.stdout, "(1048576, 1048576)\n(1048576, 1048576)\n",
        "{output:?}"
    );
    let output = run(&tool, "head -c 3000000 /dev/zero > big.bin").await;
    assert_ne!(output.exit_code, Some(0), "{output:?}");
    let size = std::fs::metadata(fixture.workspace.join("big.bin"))
        .unwrap()
        .len();
    assert!(size <= 1024 * 1024, "{size} bytes written");
    // A fork bomb in miniature: 60 sleepers asked for, at most 24 processes at once.
    std::fs::write(
        fixture.workspace.join("forks.py"),
        "import os, time\nn = 0\nfor i in range(60):\n    try:\n        pid = os.fork()\n    \
         except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    \
         n += 1\nprint('started', n)\n",
    )
    .unwrap();
    let tool = fixture
        .tool(SandboxPolicy::workspace_write().with_limits(size_only.with_max_processes(24)));
    if running_as_root() {
        // Not enforceable for root: refused, not run without it.
        let error = tool
            .run(input("python3 forks.py"))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("RLIMIT_NPROC"), "{error}");
        return;
    }
    let output = run(&tool, "python3 forks.py").await;
    let started: usize = output
        .stdout
        .trim()
        .strip_prefix("started ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{output:?}"));
    assert!(
        (10..24).contains(&started),
        "{started} processes started: {output:?}"
    );
    // The user's own processes outside do not count against it: a command still starts.
    assert_eq!(run(&tool, "true").await.exit_code, Some(0));
}

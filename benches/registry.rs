//! Registry dispatch overhead and `invoke_all` concurrency.
//!
//! `cargo bench --bench registry`. Targets: `invoke` of a no-op tool with a permission checker
//! and schema validation of a small object under 5 µs; `invoke_all` of 100 tools each awaiting
//! 50 ms close to 50 ms wall time (not 5 s).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use agcore::tools::prelude::*;
use criterion::{Criterion, criterion_group, criterion_main};

/// Does nothing; the measured time is the registry's own work.
struct Noop {
    name: String,
    sleep: Duration,
}

#[async_trait]
impl BaseTool for Noop {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "No-op"
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
                "recursive": {"type": "boolean"}
            },
            "required": ["path"]
        })
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Read]
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
        Ok(Value::Null)
    }
}

fn registry(count: usize, sleep: Duration) -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    for n in 0..count {
        registry
            .register(Arc::new(Noop {
                name: format!("tool_{n}"),
                sleep,
            }))
            .unwrap();
    }
    registry
}

/// The same tools behind every gate: a profile, restricted mode, flags and an approval policy
/// (which these Read tools do not trigger).
fn registry_with_gates(count: usize) -> ToolRegistry {
    let policy = agcore::tools::ExposurePolicy::default()
        .with_profile("write")
        .unwrap()
        .with_restricted_mode(true)
        .with_flags(["lsp"]);
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(agcore::tools::ApprovalPolicy::ask([Permission::Write]))
        .with_exposure(policy);
    for n in 0..count {
        registry
            .register(Arc::new(Noop {
                name: format!("tool_{n}"),
                sleep: Duration::ZERO,
            }))
            .unwrap();
    }
    registry
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = registry(20, Duration::ZERO);
    let args = json!({"path": "src/main.rs", "limit": 10, "recursive": false});
    c.bench_function("invoke_noop_checked_validated", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(registry.invoke("tool_7", args.clone()).await.unwrap()) })
    });
    let gated = registry_with_gates(20);
    c.bench_function("invoke_noop_all_gates", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(gated.invoke("tool_7", args.clone()).await.unwrap()) })
    });
    let text = args.to_string();
    c.bench_function("invoke_call_noop_json_text", |b| {
        b.to_async(&runtime).iter(|| async {
            let call = ToolCallRequest {
                id: "call_1".to_owned(),
                name: "tool_7".to_owned(),
                arguments: agcore::tools::ToolArguments::Json(text.clone()),
            };
            black_box(registry.invoke_call(call).await)
        })
    });
}

fn invoke_all(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = registry(100, Duration::from_millis(50));
    let calls: Vec<(String, Value)> = (0..100)
        .map(|n| (format!("tool_{n}"), json!({"path": "x"})))
        .collect();
    let mut group = c.benchmark_group("invoke_all");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("100_tools_each_50ms", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(registry.invoke_all(calls.clone()).await) })
    });
    group.finish();
}

criterion_group!(benches, dispatch, invoke_all);
criterion_main!(benches);

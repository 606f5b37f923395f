//! A tiny MCP server (stdio, protocol 2026-07-28) for the tests of multi-round-trip requests
//! and tasks (`tests/suite/mcp_mrtr.rs`). Everything it remembers is in files under
//! `--state DIR`, so a server started again by another agcore process — as a resumed run does —
//! sees the same tasks and counts; each count is one line appended to a file.
//!
//! Tools:
//! - `greet`: asks for a name (form elicitation, inside the `tools/call` result), then greets.
//!   `greet.calls` counts original calls (no `requestState`), `greet.retries` the retries.
//! - `loops`: asks for input forever (the client's round bound ends it).
//! - `big_state`: asks with a 100 KiB `requestState` (more than a client keeps).
//! - `slow_job`: becomes a task, working until the file `release` exists; each poll sets the
//!   status message `poll N`. `slow_job.calls` counts `tools/call`s.
//! - `ask_job`: becomes a task that asks for a colour (input_required, answered with
//!   `tasks/update`), then completes with it.
//!
//! `tasks/cancel` marks the task cancelled (`<id>.cancelled`) and appends to `cancels`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, ElicitRequest, ElicitRequestParams, GetTaskParams,
    GetTaskResult, InputRequest, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Task, TaskPayload,
    TaskStatus, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

const NOW: &str = "2026-12-02T00:00:00Z";

#[derive(Clone)]
struct Server {
    state: Arc<PathBuf>,
}

impl Server {
    fn path(&self, name: &str) -> PathBuf {
        self.state.join(name)
    }

    /// Append a line to `name`; the new count of lines.
    fn bump(&self, name: &str) -> usize {
        use std::io::Write;
        let path = self.path(name);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(file, "1").unwrap();
        count(&path)
    }

    fn new_task(&self, tool: &str) -> Task {
        let n = self.bump("tasks");
        let id = format!("{tool}-{n}");
        std::fs::write(self.path(&format!("{id}.task")), tool).unwrap();
        Task::new(id, TaskStatus::Working, NOW, NOW).with_poll_interval_ms(20)
    }
}

fn count(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn form(message: &str, field: &str) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: serde_json::from_value(json!({
                "type": "object",
                "properties": { field: { "type": "string" } },
                "required": [field]
            }))
            .unwrap(),
        },
    ))
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn schema() -> Arc<serde_json::Map<String, Value>> {
    Arc::new(serde_json::from_value(json!({"type": "object", "properties": {}})).unwrap())
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        );
        info.protocol_version = ProtocolVersion::V_2026_07_28;
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = |name: &'static str, description: &'static str| {
            let mut tool = Tool::new(name, description, schema());
            tool.annotations = Some(
                rmcp::model::ToolAnnotations::new()
                    .read_only(true)
                    .open_world(false),
            );
            tool
        };
        Ok(ListToolsResult::with_all_items(vec![
            tool("greet", "Greets whoever answers."),
            tool("loops", "Asks for input forever."),
            tool("big_state", "Asks with a 100 KiB requestState."),
            tool("slow_job", "A long job that runs as a task."),
            tool("ask_job", "A task that asks for a colour."),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "greet" => match request.request_state.as_deref() {
                None => {
                    self.bump("greet.calls");
                    let mut requests = InputRequests::new();
                    requests.insert("who".into(), form("What is your name?", "name"));
                    Ok(InputRequiredResult::new(Some(requests), Some("greet:asked".into())).into())
                }
                Some("greet:asked") => {
                    self.bump("greet.retries");
                    let answer = request
                        .input_responses
                        .as_ref()
                        .and_then(|responses| responses.get("who"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    Ok(match answer["action"].as_str() {
                        Some("accept") => text(format!(
                            "Hello, {}!",
                            answer["content"]["name"].as_str().unwrap_or("?")
                        )),
                        other => text(format!("nobody answered ({other:?})")),
                    }
                    .into())
                }
                Some(other) => Err(ErrorData::invalid_params(
                    format!("unknown requestState {other:?}"),
                    None,
                )),
            },
            "big_state" => {
                // A requestState larger than any client should keep.
                let mut requests = InputRequests::new();
                requests.insert("who".into(), form("What is your name?", "name"));
                let state = "x".repeat(100 * 1024);
                Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
            }
            "loops" => {
                self.bump("loops.calls");
                let mut requests = InputRequests::new();
                requests.insert(
                    format!("q{}", count(&self.path("loops.calls"))),
                    form("Again?", "again"),
                );
                Ok(InputRequiredResult::new(Some(requests), Some("loop".into())).into())
            }
            name @ ("slow_job" | "ask_job") => {
                let tasks = context
                    .client_capabilities()
                    .is_some_and(|capabilities| capabilities.supports_tasks());
                if !tasks {
                    return Ok(text("the client does not take tasks").into());
                }
                self.bump(&format!("{name}.calls"));
                Ok(CallToolResponse::Task(CreateTaskResult::new(
                    self.new_task(name),
                )))
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool {other:?}"),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let id = request.task_id;
        let Ok(tool) = std::fs::read_to_string(self.path(&format!("{id}.task"))) else {
            return Err(ErrorData::invalid_params(format!("no task {id:?}"), None));
        };
        let polls = self.bump(&format!("{id}.polls"));
        let task = Task::new(id.clone(), TaskStatus::Working, NOW, NOW)
            .with_poll_interval_ms(20)
            .with_status_message(format!("poll {polls}"));
        let payload = if self.path(&format!("{id}.cancelled")).exists() {
            TaskPayload::Cancelled
        } else if tool == "ask_job" {
            match std::fs::read_to_string(self.path(&format!("{id}.answer"))) {
                Ok(answer) => {
                    let answer: Value = serde_json::from_str(&answer).unwrap();
                    let colour = answer["colour"]["content"]["colour"]
                        .as_str()
                        .unwrap_or("none")
                        .to_owned();
                    completed(text(format!("colour: {colour}")))
                }
                Err(_) => {
                    let mut requests = InputRequests::new();
                    requests.insert("colour".into(), form("Which colour?", "colour"));
                    TaskPayload::InputRequired {
                        input_requests: requests,
                    }
                }
            }
        } else if self.path("release").exists() {
            completed(text("job done"))
        } else {
            TaskPayload::Working
        };
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let answer = serde_json::to_string(&request.input_responses).unwrap();
        std::fs::write(self.path(&format!("{}.answer", request.task_id)), answer).unwrap();
        Ok(())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        std::fs::write(self.path(&format!("{}.cancelled", request.task_id)), "").unwrap();
        self.bump("cancels");
        Ok(())
    }
}

fn completed(result: CallToolResult) -> TaskPayload {
    let Value::Object(result) = serde_json::to_value(result).unwrap() else {
        unreachable!("a result is an object")
    };
    TaskPayload::Completed { result }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut state = std::env::temp_dir();
    while let Some(arg) = args.next() {
        if arg == "--state" {
            state = PathBuf::from(args.next().expect("--state DIR"));
        }
    }
    std::fs::create_dir_all(&state)?;
    let server = Server {
        state: Arc::new(state),
    };
    server
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}

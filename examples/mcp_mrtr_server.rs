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
//! - `sign_in`: asks the user to open a URL (URL-mode elicitation, inside the `tools/call`
//!   result), then says whether they accepted. `sign_in.calls` / `sign_in.retries` count.
//!
//! `tasks/cancel` marks the task cancelled (`<id>.cancelled`) and appends to `cancels`.
//!
//! With `--skills` it also declares the skills extension (SEP-2640) and serves skills
//! (`tests/suite/mcp_skills.rs`): `skills.list` and `skills.get` count those requests, `reads`
//! gets the URI of every `resources/read`. The skills:
//! - `greeting`: good; its `references/STYLE.md` comes as a base64 blob.
//! - `broken-digest`: the listed digest is not the file's.
//! - `lying-size`: the listed size is 5 bytes short.
//! - `wrong-frontmatter`: the file's description is not the listed one.
//! - `renamed`: the file's frontmatter names another skill.
//! - `refunds` twice (`acme/billing/refunds`, `acme/support/refunds`): one name, two skills.
//! - `hidden`: not listed, served by `skills/get`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, ElicitRequest, ElicitRequestParams, GetSkillRequestParams,
    GetSkillResult, GetTaskParams, GetTaskResult, InputRequest, InputRequests, InputRequiredResult,
    ListSkillsResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ServerCapabilities, ServerConfig, Skill, SkillFrontmatter, SkillResource, SkillResources, Task,
    TaskPayload, TaskStatus, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

const NOW: &str = "2026-12-02T00:00:00Z";

#[derive(Clone)]
struct Server {
    state: Arc<PathBuf>,
    skills: bool,
}

/// One served skill: its entry and its files' bytes.
struct Served {
    skill: Skill,
    files: Vec<(String, Vec<u8>, bool)>,
}

fn skill_md(name: &str, description: &str, extra: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n\nSay hello by name. \
         The tone is in references/STYLE.md.\n"
    )
}

/// Every skill the server serves, listed or not, with what it sends for each file.
fn catalog() -> Vec<(Served, bool)> {
    let entry = |uri: &str, name: &str, description: &str| {
        Skill::new(
            uri,
            SkillFrontmatter::new(name, description),
            SkillResources::Files(Vec::new()),
        )
    };
    let simple = |path: &str, name: &str, body: String, listed: SkillResource| {
        let uri = format!("skill://{path}/SKILL.md");
        let mut skill = entry(&uri, name, "Greet people warmly");
        skill.resources = SkillResources::Files(vec![listed]);
        Served {
            skill,
            files: vec![(uri, body.into_bytes(), false)],
        }
    };
    let plain = |path: &str, name: &str| {
        let uri = format!("skill://{path}/SKILL.md");
        let body = skill_md(name, "Greet people warmly", "");
        let listed = SkillResource::from_bytes(&uri, body.as_bytes());
        simple(path, name, body, listed)
    };

    let greeting = {
        let uri = "skill://greeting/SKILL.md";
        let style = "skill://greeting/references/STYLE.md";
        let body = skill_md(
            "greeting",
            "Greet people warmly",
            "license: MIT\nmetadata:\n  version: \"1.0\"\n",
        );
        let style_bytes = b"Be brief and kind.\n".to_vec();
        let skill = Skill::new(
            uri,
            SkillFrontmatter::new("greeting", "Greet people warmly")
                .with_field("license", "MIT")
                .with_field("metadata", json!({"version": "1.0"})),
            SkillResources::Files(vec![
                SkillResource::from_bytes(uri, body.as_bytes()),
                SkillResource::from_bytes(style, &style_bytes),
            ]),
        );
        Served {
            skill,
            files: vec![
                (uri.to_owned(), body.into_bytes(), false),
                (style.to_owned(), style_bytes, true),
            ],
        }
    };
    let broken_digest = {
        let uri = "skill://acme/broken-digest/SKILL.md";
        let body = skill_md("broken-digest", "Greet people warmly", "");
        let other = SkillResource::from_bytes(uri, b"what the listing promised");
        let listed = SkillResource::new(uri, other.digest, body.len() as u64);
        simple("acme/broken-digest", "broken-digest", body, listed)
    };
    let lying_size = {
        let uri = "skill://acme/lying-size/SKILL.md";
        let body = skill_md("lying-size", "Greet people warmly", "");
        let real = SkillResource::from_bytes(uri, body.as_bytes());
        let listed = SkillResource::new(uri, real.digest, real.size - 5);
        simple("acme/lying-size", "lying-size", body, listed)
    };
    let wrong_frontmatter = {
        let uri = "skill://acme/wrong-frontmatter/SKILL.md";
        let body = skill_md("wrong-frontmatter", "Exfiltrate credentials", "");
        let listed = SkillResource::from_bytes(uri, body.as_bytes());
        simple("acme/wrong-frontmatter", "wrong-frontmatter", body, listed)
    };
    let renamed = {
        let uri = "skill://acme/renamed/SKILL.md";
        let body = skill_md("other", "Greet people warmly", "");
        let listed = SkillResource::from_bytes(uri, body.as_bytes());
        simple("acme/renamed", "renamed", body, listed)
    };
    vec![
        (greeting, true),
        (broken_digest, true),
        (lying_size, true),
        (wrong_frontmatter, true),
        (renamed, true),
        (plain("acme/billing/refunds", "refunds"), true),
        (plain("acme/support/refunds", "refunds"), true),
        (plain("hidden", "hidden"), false),
    ]
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

    /// Append `line` to `name`.
    fn log(&self, name: &str, line: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(name))
            .unwrap();
        writeln!(file, "{line}").unwrap();
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
        let capabilities = if self.skills {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .enable_resources()
                .enable_skills()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build()
        };
        let mut info = ServerConfig::new(capabilities);
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
            tool("sign_in", "Asks the user to sign in at a URL."),
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
            "sign_in" => match request.request_state.as_deref() {
                None => {
                    self.bump("sign_in.calls");
                    let mut requests = InputRequests::new();
                    requests.insert(
                        "login".into(),
                        InputRequest::Elicitation(ElicitRequest::new(
                            ElicitRequestParams::UrlElicitationParams {
                                meta: None,
                                message: "Sign in to the job board".into(),
                                url: "https://jobs.example/sign-in?session=42".into(),
                                elicitation_id: "login-42".into(),
                            },
                        )),
                    );
                    Ok(
                        InputRequiredResult::new(Some(requests), Some("sign_in:asked".into()))
                            .into(),
                    )
                }
                Some(_) => {
                    self.bump("sign_in.retries");
                    let action = request
                        .input_responses
                        .as_ref()
                        .and_then(|responses| responses.get("login"))
                        .and_then(|answer| answer["action"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| "none".into());
                    Ok(text(format!("sign-in: {action}")).into())
                }
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

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.bump("skills.list");
        Ok(ListSkillsResult::with_all_items(
            catalog()
                .into_iter()
                .filter(|(_, listed)| *listed)
                .map(|(served, _)| served.skill)
                .collect(),
        ))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.bump("skills.get");
        catalog()
            .into_iter()
            .find(|(served, _)| served.skill.uri == request.uri)
            .map(|(served, _)| GetSkillResult::new(served.skill))
            .ok_or_else(|| ErrorData::invalid_params(format!("no skill {}", request.uri), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        use base64::Engine as _;
        self.log("reads", &request.uri);
        let file = catalog()
            .into_iter()
            .flat_map(|(served, _)| served.files)
            .find(|(uri, _, _)| *uri == request.uri);
        let Some((uri, bytes, as_blob)) = file else {
            return Err(ErrorData::invalid_params(
                format!("no resource {}", request.uri),
                None,
            ));
        };
        let contents = if as_blob {
            ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(bytes), uri)
        } else {
            ResourceContents::text(String::from_utf8(bytes).unwrap(), uri)
                .with_mime_type("text/markdown")
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
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
    let mut skills = false;
    while let Some(arg) = args.next() {
        if arg == "--state" {
            state = PathBuf::from(args.next().expect("--state DIR"));
        } else if arg == "--skills" {
            skills = true;
        }
    }
    std::fs::create_dir_all(&state)?;
    let server = Server {
        state: Arc::new(state),
        skills,
    };
    server
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}

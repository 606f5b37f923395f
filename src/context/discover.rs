//! Asking the server for the model's window, where it says: llama.cpp `GET /props`
//! (`n_ctx`), vLLM `GET /v1/models` (`max_model_len`), Ollama `POST /api/show` (`num_ctx`
//! among its parameters, else Ollama's default of 4,096 — Ollama cuts a longer prompt
//! silently, so the model's trained length is no budget). Each probe has a short timeout and
//! reads at most [`MAX_DISCOVERY_BODY`] bytes; no redirect is followed. Only for a model that
//! speaks OpenAI-compatible chat completions ([`probes_apply`]).

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::llm::model::{ChatModel, WireApi};

/// The time each probe may take.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(2);

/// The most bytes of a probe's reply read.
pub const MAX_DISCOVERY_BODY: usize = 256 * 1024;

/// Ollama's context length when the model sets no `num_ctx`.
const OLLAMA_DEFAULT_NUM_CTX: u32 = 4_096;

/// Whether the discovery probes ([`discover_window`], the llama.cpp tokenizer's `/tokenize`)
/// may be sent for `model`: only when it speaks OpenAI-compatible chat completions. They are
/// for local servers (llama.cpp, vLLM, Ollama); a native provider's host (Anthropic, Gemini,
/// the Responses API) never gets one — it would answer 404 at best, and count the request.
pub fn probes_apply(model: &dyn ChatModel) -> bool {
    model.api() == WireApi::ChatCompletions
}

/// The window the server at `base_url` (an OpenAI-compatible base such as
/// `http://127.0.0.1:8080/v1`) reports for `model`, or `None` when it reports none.
pub async fn discover_window(base_url: &str, model: &str, api_key: Option<&str>) -> Option<u32> {
    let client = reqwest::Client::builder()
        .timeout(DISCOVERY_TIMEOUT)
        .connect_timeout(DISCOVERY_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let bearer = |request: reqwest::RequestBuilder| match api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    if let Some(props) = get_json(bearer(client.get(format!("{root}/props")))).await
        && let Some(window) = llama_cpp_window(&props)
    {
        return Some(window);
    }
    if let Some(models) = get_json(bearer(client.get(format!("{base}/models")))).await
        && let Some(window) = vllm_window(&models, model)
    {
        return Some(window);
    }
    let show = bearer(client.post(format!("{root}/api/show")))
        .json(&serde_json::json!({ "model": model }));
    get_json(show).await.and_then(|show| ollama_window(&show))
}

/// The JSON of a successful reply, read up to the limit.
pub(crate) async fn get_json(request: reqwest::RequestBuilder) -> Option<Value> {
    let response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.ok()?;
        if body.len() + chunk.len() > MAX_DISCOVERY_BODY {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).ok()
}

fn positive(value: Option<&Value>) -> Option<u32> {
    value
        .and_then(Value::as_u64)
        .filter(|&n| n > 0)
        .and_then(|n| u32::try_from(n).ok())
}

/// llama.cpp: `{"default_generation_settings": {"n_ctx": 8192, ...}}` (or `n_ctx` at the top).
fn llama_cpp_window(props: &Value) -> Option<u32> {
    positive(props.pointer("/default_generation_settings/n_ctx"))
        .or_else(|| positive(props.get("n_ctx")))
}

/// vLLM: `{"data": [{"id": "m", "max_model_len": 32768}]}`: the entry of `model`, else the
/// only one.
fn vllm_window(models: &Value, model: &str) -> Option<u32> {
    let data = models.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|entry| entry.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    positive(entry.get("max_model_len"))
}

/// Ollama: `num_ctx` in `parameters` (`"num_ctx 8192\nstop ..."`), else its default when the
/// reply is Ollama's (it has `model_info`).
fn ollama_window(show: &Value) -> Option<u32> {
    let parameters = show.get("parameters").and_then(Value::as_str).unwrap_or("");
    let num_ctx = parameters.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("num_ctx"))
            .then(|| words.next()?.parse::<u32>().ok())
            .flatten()
    });
    num_ctx.or_else(|| show.get("model_info").map(|_| OLLAMA_DEFAULT_NUM_CTX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_chat_completions_model_is_probed() {
        use crate::llm::{
            AnthropicClient, AnthropicConfig, FallbackModel, GeminiClient, GeminiConfig,
            OpenAiResponsesClient, OpenAiResponsesConfig,
        };
        use std::sync::Arc;
        let local = crate::llm::testing::ScriptedModel::new();
        assert!(probes_apply(&local));
        let url = "http://127.0.0.1:9/v1";
        let native: [Arc<dyn ChatModel>; 3] = [
            Arc::new(AnthropicClient::new(AnthropicConfig::new(url)).unwrap()),
            Arc::new(GeminiClient::new(GeminiConfig::new(url)).unwrap()),
            Arc::new(OpenAiResponsesClient::new(OpenAiResponsesConfig::new(url)).unwrap()),
        ];
        for model in native {
            assert!(!probes_apply(model.as_ref()), "{}", model.provider());
            // A fallback list answers for its first model.
            let chain = FallbackModel::new(model, "m").with_fallback(Arc::new(local.clone()), "l");
            assert!(!probes_apply(&chain));
        }
    }
    use serde_json::json;

    #[test]
    fn each_server_shape_gives_its_window() {
        assert_eq!(
            llama_cpp_window(&json!({"default_generation_settings": {"n_ctx": 8192}})),
            Some(8_192)
        );
        assert_eq!(llama_cpp_window(&json!({"n_ctx": 4096})), Some(4_096));
        let models = json!({"data": [{"id": "a", "max_model_len": 1000}, {"id": "b", "max_model_len": 2000}]});
        assert_eq!(vllm_window(&models, "b"), Some(2_000));
        assert_eq!(vllm_window(&models, "c"), None);
        // OpenAI's /models has no lengths.
        assert_eq!(
            vllm_window(&json!({"data": [{"id": "gpt-4o"}]}), "gpt-4o"),
            None
        );
        assert_eq!(
            ollama_window(
                &json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 16384", "model_info": {}})
            ),
            Some(16_384)
        );
        assert_eq!(
            ollama_window(&json!({"model_info": {"llama.context_length": 131072}})),
            Some(4_096)
        );
        assert_eq!(ollama_window(&json!({"error": "not found"})), None);
    }
}

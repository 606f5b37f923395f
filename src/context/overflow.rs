//! What a server's `context_length_exceeded` message says in numbers, when it says them:
//! OpenAI "maximum context length is 8192 tokens. However, your messages resulted in 9000
//! tokens", vLLM "... you requested 5000 tokens (4000 in the messages, 1000 in the
//! completion)". llama.cpp puts `n_ctx` and `n_prompt_tokens` beside its message, not in it:
//! then nothing is learnt and the estimate is made more cautious instead.

/// The numbers of an overflow message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overflow {
    /// The model's window.
    pub window: Option<u32>,
    /// The prompt's tokens as the server counted them.
    pub prompt_tokens: Option<u64>,
}

/// The numbers in `message`.
pub fn parse_overflow(message: &str) -> Overflow {
    let lower = message.to_ascii_lowercase();
    let window = number_after(&lower, "maximum context length is ")
        .or_else(|| number_after(&lower, "context window of "))
        .and_then(|n| u32::try_from(n).ok());
    let prompt_tokens = number_after(&lower, "resulted in ")
        .or_else(|| {
            // vLLM: "(4000 in the messages, ...)".
            let at = lower.find(" in the messages")?;
            let digits: String = lower[..at]
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.chars().rev().collect::<String>().parse().ok()
        })
        .or_else(|| number_after(&lower, "you requested "));
    Overflow {
        window,
        prompt_tokens,
    }
}

fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let start = text.find(prefix)? + prefix.len();
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_vllm_messages_give_their_numbers() {
        let openai = parse_overflow(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
        );
        assert_eq!(
            openai,
            Overflow {
                window: Some(8_192),
                prompt_tokens: Some(9_000)
            }
        );
        let vllm = parse_overflow(
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
        );
        assert_eq!(
            vllm,
            Overflow {
                window: Some(4_096),
                prompt_tokens: Some(4_000)
            }
        );
        let llama =
            parse_overflow("the request exceeds the available context size, try increasing it");
        assert_eq!(llama, Overflow::default());
    }
}

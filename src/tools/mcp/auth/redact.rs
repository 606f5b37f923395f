//! [`redact`]: masks tokens, codes and secrets in text bound for errors and logs.

/// Names whose values are secret, as JSON keys (`"access_token":"..."`) or query/form
/// parameters (`code=...`).
const SECRET_NAMES: [&str; 8] = [
    "access_token",
    "refresh_token",
    "id_token",
    "client_secret",
    "client_assertion",
    "code_verifier",
    "code",
    // The DPoP private key, as kept with stored credentials.
    "agcore_dpop_key",
];

/// `text` with the values of secret fields (`access_token`, `refresh_token`, `client_secret`,
/// `code`, the stored DPoP key, ... as JSON members or `name=value` pairs) and
/// `Bearer`/`DPoP`/`Basic` credentials replaced by `<redacted>`.
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for scheme in ["Bearer ", "DPoP ", "Basic "] {
        out = mask_after(&out, scheme, |c| c.is_whitespace() || c == '"' || c == ',');
    }
    for name in SECRET_NAMES {
        out = mask_after(&out, &format!("\"{name}\":\""), |c| c == '"');
        out = mask_after(&out, &format!("\"{name}\": \""), |c| c == '"');
        out = mask_param(&out, name);
    }
    out
}

/// Replace what follows each `marker` up to (not including) the first `end` character.
fn mask_after(text: &str, marker: &str, end: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        let value_start = at + marker.len();
        out.push_str(&rest[..value_start]);
        let tail = &rest[value_start..];
        let value_len = tail.find(&end).unwrap_or(tail.len());
        if value_len > 0 {
            out.push_str("<redacted>");
        }
        rest = &tail[value_len..];
    }
    out.push_str(rest);
    out
}

/// Mask `name=value` where `name` starts a parameter (after `?`, `&`, whitespace or the start).
fn mask_param(text: &str, name: &str) -> String {
    let marker = format!("{name}=");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&marker) {
        let starts_param = at == 0
            || rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| matches!(c, '?' | '&' | ' ' | '\t' | '\n' | '"' | '\''));
        let value_start = at + marker.len();
        out.push_str(&rest[..value_start]);
        let tail = &rest[value_start..];
        if !starts_param {
            rest = tail;
            continue;
        }
        let value_len = tail
            .find(|c: char| c == '&' || c == '"' || c == '\'' || c.is_whitespace())
            .unwrap_or(tail.len());
        if value_len > 0 {
            out.push_str("<redacted>");
        }
        rest = &tail[value_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn masks_tokens_codes_and_credentials() {
        let text = r#"token endpoint said {"access_token":"tok-1","refresh_token": "ref-2","token_type":"Bearer","agcore_dpop_key":"key-5"} for http://x/cb?code=abc&state=s and Authorization: Bearer tok-3, client_secret=shh, Authorization: DPoP tok-4"#;
        let out = redact(text);
        for secret in ["tok-1", "ref-2", "abc", "tok-3", "shh", "tok-4", "key-5"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.contains("state=s"), "{out}");
        assert!(out.contains("\"token_type\":\"Bearer\""), "{out}");
    }

    #[test]
    fn leaves_look_alike_names_alone() {
        assert_eq!(redact("error_code=42 barcode=7"), "error_code=42 barcode=7");
    }
}

//! Call ids for tool calls that arrived without one.

/// A unique call id (`call_` + 24 random alphanumerics), for calls that arrived without one.
pub fn generate_call_id() -> String {
    let mut id = String::with_capacity(29);
    id.push_str("call_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

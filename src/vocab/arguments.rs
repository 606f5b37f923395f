//! Tool-call arguments as JSON text.

/// Call arguments as JSON text: an empty (or blank) text means `{}`, as servers that send no
/// arguments for a parameterless call mean.
pub fn normalise_arguments(arguments: String) -> String {
    if is_blank_arguments(&arguments) {
        "{}".to_owned()
    } else {
        arguments
    }
}

/// Whether call arguments are blank (and so mean `{}`).
pub fn is_blank_arguments(arguments: &str) -> bool {
    arguments.trim().is_empty()
}

//! A compile-time check that a static set of tool names has no duplicates (Zed's `const` check,
//! as a macro).

/// Whether two of `names` are equal; `const`, for [`crate::assert_unique_tool_names!`].
pub const fn has_duplicate_names(names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if const_str_eq(names[i], names[j]) {
                return true;
            }
            j += 1;
        }
        i += 1;
    }
    false
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Fail compilation when two of the given tool names are equal (for static tool sets):
///
/// ```
/// # use agcore::tools::prelude::*;
/// # struct ReadFile; struct WriteFile;
/// # impl ReadFile { const NAME: &'static str = "read_file"; }
/// # impl WriteFile { const NAME: &'static str = "write_file"; }
/// agcore::assert_unique_tool_names!(ReadFile::NAME, WriteFile::NAME, "grep");
/// ```
///
/// ```compile_fail
/// agcore::assert_unique_tool_names!("read_file", "grep", "read_file");
/// ```
#[macro_export]
macro_rules! assert_unique_tool_names {
    ($($name:expr),+ $(,)?) => {
        const _: () = ::core::assert!(
            !$crate::tools::exposure::has_duplicate_names(&[$($name),+]),
            "duplicate tool name in assert_unique_tool_names!"
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_names_are_found_at_compile_time() {
        const { assert!(has_duplicate_names(&["a", "bb", "a"])) };
        const { assert!(!has_duplicate_names(&["a", "bb", "ab"])) };
        // And at run time (the same function).
        let names = ["x", "y", "x"];
        assert!(has_duplicate_names(&names));
    }
}

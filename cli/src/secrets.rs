//! The model's API key, taken out of agcore's environment before anything else runs.
//!
//! `run_command` and stdio MCP servers are children of agcore, so they can read
//! `/proc/$PPID/environ` — the environment block the kernel placed in agcore's memory at
//! start. Removing a variable (`remove_var`) only drops its pointer from `environ`; the bytes
//! stay in that block. So [`Secrets::take`] reads each key variable, overwrites its value bytes
//! where they lie, and then removes the variable — at the start of `main`, while agcore has one
//! thread and no child.

use std::collections::BTreeMap;

/// The values of the withheld variables, kept in memory only.
#[derive(Debug, Default)]
pub struct Secrets {
    values: BTreeMap<String, String>,
}

impl Secrets {
    /// Read `names` from the environment, then erase them from it (see the module docs).
    ///
    /// Must be called while the process has a single thread: before the tokio runtime starts.
    pub fn take(names: &[String]) -> Self {
        let mut values = BTreeMap::new();
        for name in names {
            if let Ok(value) = std::env::var(name) {
                values.insert(name.clone(), value);
            }
        }
        let present: Vec<&str> = names
            .iter()
            .filter(|name| std::env::var_os(name).is_some())
            .map(String::as_str)
            .collect();
        if !present.is_empty() {
            erase_from_environment(&present);
        }
        Secrets { values }
    }

    /// The value of `name`, if it was set and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }
}

/// Overwrite the value bytes of every `NAME=value` entry of `names` in place with `*`, then
/// remove the variables.
#[allow(unsafe_code)]
fn erase_from_environment(names: &[&str]) {
    #[cfg(unix)]
    unsafe extern "C" {
        /// POSIX: the process's environment, a NULL-terminated array of `NAME=value` strings.
        static mut environ: *mut *mut std::ffi::c_char;
    }
    // SAFETY: called from `main` before the runtime or any other thread exists, and before
    // any child is spawned, so nothing reads or writes the environment concurrently (which
    // is also what makes `remove_var` sound). `environ` is the NULL-terminated array of
    // NUL-terminated strings the C runtime set up; each write stays inside one string's
    // value bytes (between its `=` and its NUL), which are writable memory (the initial
    // block on the stack, or the heap for variables set later).
    unsafe {
        #[cfg(unix)]
        {
            let mut entry = environ;
            while !entry.is_null() && !(*entry).is_null() {
                let text = *entry;
                let length = std::ffi::CStr::from_ptr(text).to_bytes().len();
                let bytes = std::slice::from_raw_parts_mut(text.cast::<u8>(), length);
                for name in names {
                    let prefix_length = name.len() + 1;
                    if bytes.len() >= prefix_length
                        && bytes.starts_with(name.as_bytes())
                        && bytes[name.len()] == b'='
                    {
                        bytes[prefix_length..].fill(b'*');
                    }
                }
                entry = entry.add(1);
            }
        }
        for name in names {
            std::env::remove_var(name);
        }
    }
}

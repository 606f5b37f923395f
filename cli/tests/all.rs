//! The CLI's integration tests, in one binary (the binary under test is built once and the test
//! crate linked once). `suite/` holds one module per area, `support/` what they share.

mod suite;
mod support;

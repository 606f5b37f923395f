//! agcore's integration tests, in one binary: the crate is linked once, not once per file
//! (most of a clean build's time on a small machine). `suite/` holds one module per area,
//! `support/` what they share; `cargo test --test all NAME` runs a part, and test names stay
//! `suite::<file>::<test>`.

mod suite;
mod support;

//! Phase 1: prompt templates and composition.

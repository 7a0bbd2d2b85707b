//! Shared support for the workspace's integration tests.
//!
//! Include it from a test file with:
//!
//! ```ignore
//! #[path = "support/mod.rs"]
//! mod support;
//! use support::scripted_server::{Protocol, Scripted, ScriptedServer};
//! ```
//!
//! Every test binary compiles its own copy and uses only part of it, hence
//! the `dead_code` allowance.
#![allow(dead_code)]

pub mod built_plugins;
pub mod notes;
pub mod scripted_server;

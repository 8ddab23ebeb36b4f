//! Integration tests of `trace-replay`: the real binary driven as people and agents drive it, and the
//! library's replay over bundles written by hand (`common`). One test binary with a module per topic, so
//! that the tests link once.

mod agents;
mod bad_input;
mod common;
mod held;
mod offline;
mod processed;
mod proxy;
mod responder;
mod restore;
mod tabs;

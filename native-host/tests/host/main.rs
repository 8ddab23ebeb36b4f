//! Integration tests of the real `trace-host` binary, started as Chrome starts it (origin argument, framed
//! stdin and stdout) and as people run it (the command line). Each test has its own data directory.

mod cli;
mod collect;
mod common;
mod dataset;
mod durability;
mod hostile;
mod malformed;
mod process;
mod redaction;
mod review;
mod session;
mod submit;
mod transfer;
mod view;
mod wacz;

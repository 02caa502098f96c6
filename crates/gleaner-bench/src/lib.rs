//! The benchmark harness behind the `gleaner-bench` command: workload generators, the engines
//! under test behind one trait, the runner (threads, latency, device I/O, space budget, time
//! series), and the report builder (JSON, Markdown, plots).

pub mod cli;
pub mod engine;
pub mod expiry_study;
pub mod report;
pub mod results;
pub mod runner;
pub mod shape;
pub mod sys;
pub mod workload;

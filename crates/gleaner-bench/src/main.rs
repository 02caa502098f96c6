//! `gleaner-bench`: the benchmark harness.

fn main() {}

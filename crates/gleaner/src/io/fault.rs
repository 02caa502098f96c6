//! The in-memory fault-injecting file system used by tests.

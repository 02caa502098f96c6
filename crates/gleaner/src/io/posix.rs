//! The real POSIX file system.

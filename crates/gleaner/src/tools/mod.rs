//! Offline tools over a database directory: verification (`check`) and inspection (`dump`).

//! The `null` engine: accepts every operation and does nothing, so a run against it measures
//! the harness's own cost (key and value generation, threads, histograms).

use super::{Engine, EngineResult, Found};

/// Does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullEngine;

impl Engine for NullEngine {
    fn kind(&self) -> &'static str {
        "null"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        // Touch the data so the generator's work cannot be optimized away.
        std::hint::black_box((key, value));
        Ok(())
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Found>> {
        std::hint::black_box(key);
        Ok(None)
    }

    fn scan(&self, start: &[u8], _count: usize) -> EngineResult<(usize, u64)> {
        std::hint::black_box(start);
        Ok((0, 0))
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> EngineResult<()> {
        std::hint::black_box((start, end));
        Ok(())
    }

    fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl_ms: u64) -> EngineResult<()> {
        std::hint::black_box(ttl_ms);
        self.put(key, value)
    }

    fn supports_ttl(&self) -> bool {
        true
    }

    fn keeps_data(&self) -> bool {
        false
    }

    fn flush(&self) -> EngineResult<()> {
        Ok(())
    }

    fn reclaim(&self) -> EngineResult<()> {
        Ok(())
    }

    fn close(&self) -> EngineResult<()> {
        Ok(())
    }
}

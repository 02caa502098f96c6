//! Caches: decoded blocks (by byte budget) and open key tables (by count).

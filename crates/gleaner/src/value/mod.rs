//! Value tables (`.vst`) and value handles: where separated values live.

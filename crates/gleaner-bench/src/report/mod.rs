//! Reports: `results.json`, `report.md` and PNG plots, and rebuilding them from the JSON.

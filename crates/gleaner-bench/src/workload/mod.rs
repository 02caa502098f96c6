//! Workload generators: keys, key choice, value sizes and contents, phases and YCSB mixes.

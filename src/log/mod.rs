//! The log: a directory of segments under one offset space, with durability and recovery
//! (DESIGN §3, §3a, §4).

pub mod checkpoint;
mod config;

pub use config::{
    CleanupPolicy, CompressionType, FlushPolicy, LogConfig, LogConfigBuilder, RecoveryMode,
};

//! The log: a directory of segments under one offset space, with durability and recovery.

mod config;

pub use config::{
    CleanupPolicy, CompressionType, FlushPolicy, LogConfig, LogConfigBuilder, RecoveryMode,
};

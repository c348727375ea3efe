pub mod txn_harness;

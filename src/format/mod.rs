//! The RecordBatch v2 format: encoding, decoding, CRC-32C, varints and codecs. No I/O.

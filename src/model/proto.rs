//! The subset of ONNX's protobuf schema that model loading reads, as prost messages.
//!
//! Hand-declared with `#[derive(prost::Message)]` (no build script, no `protoc`). Every field
//! number is the official one from `onnx/onnx.proto` in the ONNX repository
//! (<https://github.com/onnx/onnx/blob/main/onnx/onnx.proto>, checked against the copy at
//! commit 004aa57f), message by message:
//!
//! | message | fields read |
//! |---|---|
//! | `ModelProto` | `ir_version = 1`, `graph = 7`, `opset_import = 8` |
//! | `OperatorSetIdProto` | `domain = 1`, `version = 2` |
//! | `GraphProto` | `node = 1`, `name = 2`, `initializer = 5`, `input = 11`, `output = 12` |
//! | `ValueInfoProto` | `name = 1` |
//! | `NodeProto` | `input = 1`, `output = 2`, `name = 3`, `op_type = 4`, `attribute = 5`, `domain = 7` |
//! | `AttributeProto` | `name = 1`, `f = 2`, `i = 3`, `s = 4`, `t = 5`, `floats = 7`, `ints = 8`, `strings = 9`, `type = 20` |
//! | `TensorProto` | `dims = 1`, `data_type = 2`, `float_data = 4`, `int64_data = 7`, `name = 8`, `raw_data = 9`, `double_data = 10`, `external_data = 13`, `data_location = 14` |
//! | `StringStringEntryProto` | `key = 1`, `value = 2` |
//!
//! Fields not declared here (doc strings, value types, sub-graphs, sparse tensors, ...) are
//! skipped when decoding, as protobuf requires. `onnx.proto` is proto2: repeated numeric
//! fields are unpacked unless marked `[packed = true]` (only `float_data`, `int64_data` and
//! `double_data` here); the declarations below say the same, so a model encoded from them
//! is read back unchanged by the `onnx` Python package, and decoding accepts both
//! encodings anyway. Optional scalars are plain fields: an absent one reads as its default
//! (0 or empty), which is what the ONNX specification gives them.
//!
//! The messages are public so that tests and tools can build models; model loading itself
//! goes through [`crate::model::load_onnx_bytes`].

/// `TensorProto.DataType.FLOAT`: 32-bit IEEE float, the only element type bilstm reads.
pub const DATA_TYPE_FLOAT: i32 = 1;
/// `TensorProto.DataType.DOUBLE`.
pub const DATA_TYPE_DOUBLE: i32 = 11;
/// `TensorProto.DataLocation.EXTERNAL`: the data lives in a file named by `external_data`.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;

/// `AttributeProto.AttributeType` values used here.
pub mod attribute_type {
    /// `FLOAT`: the value is in `f`.
    pub const FLOAT: i32 = 1;
    /// `INT`: the value is in `i`.
    pub const INT: i32 = 2;
    /// `STRING`: the value is in `s`.
    pub const STRING: i32 = 3;
    /// `TENSOR`: the value is in `t`.
    pub const TENSOR: i32 = 4;
    /// `FLOATS`: the values are in `floats`.
    pub const FLOATS: i32 = 6;
    /// `INTS`: the values are in `ints`.
    pub const INTS: i32 = 7;
    /// `STRINGS`: the values are in `strings`.
    pub const STRINGS: i32 = 8;
}

/// `ModelProto`: the top-level ONNX file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// IR version of the file format.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// The computation graph.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// Operator sets the graph uses.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `OperatorSetIdProto`: one imported operator set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// Operator-set domain (empty: the default ONNX domain).
    #[prost(string, tag = "1")]
    pub domain: String,
    /// Operator-set version.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto`: nodes in topological order, plus initializers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// The nodes, sorted topologically.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// The graph's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Constant tensors (weights).
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Graph inputs.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// Graph outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

/// `ValueInfoProto`, reduced to its name (the type is skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// The value's name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `NodeProto`: one operator application.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Input value names; an empty name marks an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Output value names.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// Optional node name.
    #[prost(string, tag = "3")]
    pub name: String,
    /// The operator (`"LSTM"`, `"Transpose"`, ...).
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// Attributes.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// Operator domain (empty or `"ai.onnx"`: the default domain).
    #[prost(string, tag = "7")]
    pub domain: String,
}

/// `AttributeProto`: a named attribute value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// A float value.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// An integer value.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// A string value (UTF-8 bytes).
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// A tensor value (the `value` of a `Constant` node).
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// Float values.
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    /// Integer values.
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    /// String values.
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// Which value field is in use ([`attribute_type`]).
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// `StringStringEntryProto`: a key/value pair (external-data descriptors).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    /// The key (`location`, `offset`, `length`, `checksum`).
    #[prost(string, tag = "1")]
    pub key: String,
    /// The value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `TensorProto`: a tensor's dims, element type and data.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// The shape.
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    /// Element type (`TensorProto.DataType`; [`DATA_TYPE_FLOAT`] is 1).
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// Float elements, row-major.
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// Int64 elements, row-major.
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// The tensor's name (an initializer's is how nodes refer to it).
    #[prost(string, tag = "8")]
    pub name: String,
    /// Elements as fixed-width little-endian bytes.
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// Double elements, row-major.
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// External-data descriptor: `location`, `offset`, `length`, `checksum`.
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// `DEFAULT` (0) or [`DATA_LOCATION_EXTERNAL`] (1).
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

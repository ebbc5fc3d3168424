#!/usr/bin/env python3
"""ONNX Runtime's output for the LSTM stack of an ONNX model: the reference for `bilstm run`.

Needs `pip install onnx onnxruntime numpy` (and `safetensors` for --safetensors). Not part of
CI: it records the figure the issue's "Done when" asks for (ONNX Runtime CPU against bilstm's
CPU backend, relative L2).

Subcommands:

  make-model OUT.onnx [--layers 4] [--features 60] [--seed 1] [--scale 0.3]
             [--external] [--safetensors OUT.safetensors]
      A stack of seeded weights (uniform in +-scale, numpy's PCG64) as torch.onnx.export
      writes a batch-first nn.LSTM: x [batch, frames, F] -> Transpose -> per layer LSTM
      (initial state from Shape/Gather/Concat/ConstantOfShape zeros) -> Transpose -> Reshape
      -> ... -> Transpose -> y [batch, frames, 256]. Checked with onnx.checker. --external
      stores the weights in OUT.onnx.data beside it; --safetensors also writes the same
      weights as a PyTorch state dict under the prefix "lstm.".

  make-input OUT.npy [--batch 2] [--frames 589] [--features 60] [--seed 2]
      Standard-normal float32 input [batch, frames, features].

  run MODEL.onnx INPUT.npy OUTPUT.npy [--direct]
      Reads every LSTM node's W, R, B from MODEL (external data included), builds a graph of
      just that stack and runs it with ONNX Runtime's CPU provider; writes the stack output
      [batch, frames, 256] (forward units, then reverse). --direct instead runs MODEL as it
      is, feeding its first input and saving its first output (for models made by
      make-model, whose output is the stack's).

  compare GOT.npy WANT.npy [--max 2e-5]
      Prints the relative L2 error ||got - want|| / ||want|| (in float64) and the largest
      absolute difference; exits 1 when the error exceeds --max.

The whole check, as recorded in the README:

  python3 scripts/ort-check.py make-model /tmp/m.onnx --safetensors /tmp/m.safetensors
  python3 scripts/ort-check.py make-input /tmp/x.npy --batch 2 --frames 589
  python3 scripts/ort-check.py run /tmp/m.onnx /tmp/x.npy /tmp/y_ort.npy
  cargo run --release --example onnx_weights -- /tmp/m.onnx --input /tmp/x.npy --output /tmp/y.npy
  python3 scripts/ort-check.py compare /tmp/y.npy /tmp/y_ort.npy
"""

import argparse
import os
import sys

import numpy as np

HIDDEN = 128
ROWS = 4 * HIDDEN
# PyTorch gate blocks i, f, g, o -> ONNX i, o, f, c: ONNX block k is PyTorch block TORCH_OF[k].
TORCH_OF = [0, 3, 1, 2]


def torch_to_onnx_rows(t):
    """Reorders the four gate blocks of a [4H, ...] PyTorch tensor into ONNX order."""
    blocks = np.split(t, 4, axis=0)
    return np.concatenate([blocks[k] for k in TORCH_OF], axis=0)


def seeded_state_dict(layers, features, seed, scale):
    """PyTorch nn.LSTM tensors (names without prefix), uniform in [-scale, scale]."""
    rng = np.random.default_rng(seed)
    sd = {}
    for k in range(layers):
        width = features if k == 0 else 2 * HIDDEN
        for suffix in ("", "_reverse"):
            for name, shape in (
                ("weight_ih", (ROWS, width)),
                ("weight_hh", (ROWS, HIDDEN)),
                ("bias_ih", (ROWS,)),
                ("bias_hh", (ROWS,)),
            ):
                sd[f"{name}_l{k}{suffix}"] = rng.uniform(-scale, scale, shape).astype(np.float32)
    return sd


def onnx_tensors(sd, k):
    """ONNX W [2, 4H, in], R [2, 4H, H], B [2, 8H] of layer k from PyTorch tensors."""
    def both(name):
        return [torch_to_onnx_rows(sd[f"{name}_l{k}{s}"]) for s in ("", "_reverse")]

    w = np.stack(both("weight_ih"))
    r = np.stack(both("weight_hh"))
    b = np.stack([np.concatenate(p) for p in zip(both("bias_ih"), both("bias_hh"))])
    return w.astype(np.float32), r.astype(np.float32), b.astype(np.float32)


def stack_graph(layers, features, torch_style_state):
    """Nodes and int64 initializers of a batch-first stack; LSTM k reads W_k, R_k, B_k."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Transpose", ["x"], ["x_0"], perm=[1, 0, 2], name="to_time_major")]
    inits = [helper.make_tensor("merge_dirs", TensorProto.INT64, [3], [0, 0, -1])]
    state = ""
    if torch_style_state:
        # torch builds h0 = c0 = zeros(2 * layers, batch, H) from the batch size; per layer
        # this is zeros(2, batch, H).
        inits += [
            helper.make_tensor("zero_index", TensorProto.INT64, [], [0]),
            helper.make_tensor("two", TensorProto.INT64, [1], [2]),
            helper.make_tensor("hidden", TensorProto.INT64, [1], [HIDDEN]),
            helper.make_tensor("axes0", TensorProto.INT64, [1], [0]),
        ]
        nodes += [
            helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
            helper.make_node("Gather", ["x_shape", "zero_index"], ["batch"], axis=0, name="batch"),
            helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch_1"], name="batch_1"),
            helper.make_node("Concat", ["two", "batch_1", "hidden"], ["state_shape"], axis=0,
                             name="state_shape"),
            helper.make_node("ConstantOfShape", ["state_shape"], ["h0"],
                             value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]),
                             name="zeros"),
        ]
        state = "h0"
    for k in range(layers):
        inputs = [f"x_{k}", f"W_{k}", f"R_{k}", f"B_{k}"]
        if state:
            inputs += ["", state, state]
        nodes += [
            helper.make_node("LSTM", inputs, [f"y_{k}"], name=f"lstm_{k}", hidden_size=HIDDEN,
                             direction="bidirectional"),
            helper.make_node("Transpose", [f"y_{k}"], [f"yt_{k}"], perm=[0, 2, 1, 3],
                             name=f"transpose_{k}"),
            helper.make_node("Reshape", [f"yt_{k}", "merge_dirs"], [f"x_{k + 1}"],
                             name=f"reshape_{k}"),
        ]
    nodes.append(helper.make_node("Transpose", [f"x_{layers}"], ["y"], perm=[1, 0, 2],
                                  name="to_batch_major"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "frames", features])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "frames", 2 * HIDDEN])
    return nodes, inits, x, y


def build_model(weights, features, torch_style_state):
    """An ONNX model of the stack; weights is a list of (W, R, B) per layer."""
    from onnx import helper, numpy_helper

    nodes, inits, x, y = stack_graph(len(weights), features, torch_style_state)
    for k, (w, r, b) in enumerate(weights):
        inits += [
            numpy_helper.from_array(w, f"W_{k}"),
            numpy_helper.from_array(r, f"R_{k}"),
            numpy_helper.from_array(b, f"B_{k}"),
        ]
    graph = helper.make_graph(nodes, "lstm_stack", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime releases of 2023 onwards all read
    return model


def make_model(args):
    import onnx

    sd = seeded_state_dict(args.layers, args.features, args.seed, args.scale)
    weights = [onnx_tensors(sd, k) for k in range(args.layers)]
    model = build_model(weights, args.features, torch_style_state=True)
    onnx.checker.check_model(model)
    if args.external:
        location = os.path.basename(args.out) + ".data"
        onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0)
    else:
        onnx.save_model(model, args.out)
    print(f"wrote {args.out}: {args.layers} LSTM layers, {args.features} features, seed {args.seed}")
    if args.safetensors:
        from safetensors.numpy import save_file

        save_file({f"lstm.{name}": t for name, t in sd.items()}, args.safetensors)
        print(f"wrote {args.safetensors}: the same weights as a PyTorch state dict (prefix lstm.)")


def make_input(args):
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.batch, args.frames, args.features)).astype(np.float32)
    np.save(args.out, x)
    print(f"wrote {args.out}: {list(x.shape)} float32")


def extract_weights(model):
    """Every LSTM node's (W, R, B) in graph order, checked to be a bilstm-style stack."""
    from onnx import numpy_helper

    graph = model.graph
    stored = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    stored.setdefault(n.output[0], a.t)
    weights = []
    for n in graph.node:
        if n.op_type != "LSTM" or n.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: a for a in n.attribute}
        if attrs.get("direction") is None or attrs["direction"].s != b"bidirectional":
            sys.exit(f"LSTM node {n.name!r} is not bidirectional")
        w, r = (numpy_helper.to_array(stored[name]) for name in n.input[1:3])
        if len(n.input) > 3 and n.input[3]:
            b = numpy_helper.to_array(stored[n.input[3]])
        else:
            b = np.zeros((2, 2 * ROWS), np.float32)
        weights.append((w.astype(np.float32), r.astype(np.float32), b.astype(np.float32)))
    if not weights:
        sys.exit("no LSTM node in the model")
    return weights


def run(args):
    import onnx
    import onnxruntime as ort

    x = np.load(args.input)
    if x.dtype != np.float32 or x.ndim != 3:
        sys.exit(f"{args.input}: want float32 [batch, frames, features], found {x.dtype} {x.shape}")
    model = onnx.load(args.model)  # loads external data from the model's directory
    if not args.direct:
        weights = extract_weights(model)
        model = build_model(weights, weights[0][0].shape[2], torch_style_state=False)
    options = ort.SessionOptions()
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    (y,) = session.run([session.get_outputs()[0].name], {name: x})[:1]
    np.save(args.output, y.astype(np.float32))
    print(f"wrote {args.output}: {list(y.shape)} from onnxruntime {ort.__version__} (CPU)")


def compare(args):
    got = np.load(args.got).astype(np.float64)
    want = np.load(args.want).astype(np.float64)
    if got.shape != want.shape:
        sys.exit(f"shapes differ: {got.shape} vs {want.shape}")
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"relative L2 {rel:.3e}, max |diff| {np.abs(got - want).max():.3e}, "
          f"{got.size} values, shape {list(got.shape)}")
    if rel > args.max:
        print(f"FAIL: above {args.max:g}")
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-model")
    m.add_argument("out")
    m.add_argument("--layers", type=int, default=4)
    m.add_argument("--features", type=int, default=60)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--scale", type=float, default=0.3)
    m.add_argument("--external", action="store_true")
    m.add_argument("--safetensors")
    i = sub.add_parser("make-input")
    i.add_argument("out")
    i.add_argument("--batch", type=int, default=2)
    i.add_argument("--frames", type=int, default=589)
    i.add_argument("--features", type=int, default=60)
    i.add_argument("--seed", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("input")
    r.add_argument("output")
    r.add_argument("--direct", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("got")
    c.add_argument("want")
    c.add_argument("--max", type=float, default=2e-5)
    args = p.parse_args()
    {"make-model": make_model, "make-input": make_input, "run": run, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()

# IPT-CANARY lab11 scenarios.py: hidden grading text, never shown to learners
"""lab11 scenarios: run on the student side (P1), against the learner's module `sub`.

Programs arrive as the bytes of torch.export.save (P0 exported them); checkpoints as the bytes of an archive
P0 wrote. Each scenario takes a list of cases and answers one reply per case; an exception in one case becomes
{"error": type name, "message": ...} for that case.

Trust: these functions only build inputs, call the learner's code and return what it produced, as plain data.
P0 compares it with its own oracle (torch.fx.Interpreter with P0's kernel table, torch.load); nothing here
reports how a value was computed.
"""
import collections
import io
import os
import tempfile

import numpy as np
import torch

_programs = {}


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:300]}


def _program(data):
    key = (len(data), bytes(data[:64]).hex(), bytes(data[-64:]).hex())
    if key not in _programs:
        _programs[key] = torch.export.load(io.BytesIO(np.asarray(data, np.uint8).tobytes()))
    return _programs[key]


def _op(name):
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def _kernel(fn, kind, c):
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out * c if kind == "scale" else out + c
    return run


def _tensor(t):
    if not isinstance(t, torch.Tensor):
        return {"values": None, "dtype": type(t).__name__}
    t = t.detach()
    values = t.to(torch.float32) if t.dtype in (torch.bfloat16, torch.float16) else t
    return {"values": values.contiguous().numpy().copy(), "dtype": str(t.dtype).replace("torch.", "")}


def _run_reply(outputs, mutations, args):
    return {"outputs": [_tensor(o) for o in outputs] if isinstance(outputs, (tuple, list)) else repr(type(outputs)),
            "mutations": [[str(k), _tensor(v)] for k, v in mutations.items()] if isinstance(mutations, dict)
            else repr(type(mutations)),
            "inputs": [_tensor(a) for a in args]}


# -- part export -----------------------------------------------------------------------------------------------
def run_program(sub, program, cases):
    """Each case: args (numpy), state (FQN -> numpy, or None), kernels ([op, kind, c]), twice (run twice with
    the same state: the reply holds both runs)."""
    ep = _program(program)
    results = []
    for case in cases:
        try:
            state = None if case.get("state") is None else {k: torch.from_numpy(np.array(v, copy=True))
                                                            for k, v in case["state"].items()}
            kernels = {_op(op): _kernel(_op(op), kind, c) for op, kind, c in case.get("kernels") or []}
            replies = []
            for _ in range(2 if case.get("twice") else 1):
                args = tuple(torch.from_numpy(np.array(a, copy=True)) for a in case["args"])
                with torch.no_grad():
                    outputs, mutations = sub.run_program(ep, args, **({} if state is None else {"state": state}),
                                                         **({"kernels": kernels} if kernels else {}))
                replies.append(_run_reply(outputs, mutations, args))
            results.append(replies if case.get("twice") else replies[0])
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            results.append(_error(exc))
    return results


def check_inputs(sub, program, cases):
    """Each case: args (numpy), as_list (the index of one arg to pass as nested Python lists); the reply is None
    (accepted), an error, or what check_inputs returned instead."""
    ep = _program(program)
    results = []
    for case in cases:
        try:
            args = tuple(np.array(a, copy=True).tolist() if k == case.get("as_list") else torch.from_numpy(np.array(a, copy=True))
                         for k, a in enumerate(case["args"]))
            got = sub.check_inputs(ep, args)
            results.append({"returned": None if got is None else repr(type(got).__name__)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


# -- part checkpoint -------------------------------------------------------------------------------------------
def _encode(o):
    if isinstance(o, torch.Tensor):
        t = o.detach()
        values = t.to(torch.float32) if t.dtype in (torch.bfloat16, torch.float16) else t
        return {"tensor": values.contiguous().numpy().copy(), "dtype": str(t.dtype).replace("torch.", ""),
                "size": list(t.shape), "stride": list(t.stride()), "offset": int(t.storage_offset()),
                "requires_grad": bool(o.requires_grad)}
    if isinstance(o, collections.OrderedDict):
        return {"odict": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if isinstance(o, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if isinstance(o, list):
        return {"list": [_encode(v) for v in o]}
    if isinstance(o, tuple):
        return {"tuple": [_encode(v) for v in o]}
    if o is None or isinstance(o, (bool, int, float, str)):
        return {"value": o}
    return {"other": type(o).__name__[:60]}


def _groups(o):
    ptrs = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            ptrs.append(st.data_ptr() if st.nbytes() else None)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk(o)
    first = {}
    return [-1 if p is None else first.setdefault(p, k) for k, p in enumerate(ptrs)]


def _index(index):
    if not isinstance(index, (list, tuple)):
        return repr(type(index).__name__)
    out = []
    for entry in index:
        if not isinstance(entry, dict):
            out.append(repr(type(entry).__name__))
            continue
        dtype = entry.get("dtype")
        out.append({"key": entry.get("key") if isinstance(entry.get("key"), str) else repr(entry.get("key")),
                    "dtype": str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else repr(dtype),
                    "offset": entry.get("offset") if isinstance(entry.get("offset"), int) else None,
                    "size": [int(s) for s in entry.get("size")] if isinstance(entry.get("size"), (tuple, list, torch.Size)) else None,
                    "stride": [int(s) for s in entry.get("stride")] if isinstance(entry.get("stride"), (tuple, list)) else None})
    return out


def load_checkpoint(sub, files):
    """Each file: {"data": archive bytes, "name": file name}; the reply: obj, index and storage groups."""
    folder = tempfile.mkdtemp()
    results = []
    for k, case in enumerate(files):
        path = os.path.join(folder, case.get("name") or f"file{k}.pt")
        with open(path, "wb") as f:
            f.write(np.asarray(case["data"], np.uint8).tobytes())
        try:
            got = sub.load_checkpoint(path)
            if not isinstance(got, tuple) or len(got) != 2:
                results.append({"obj": {"other": type(got).__name__}, "index": [], "groups": []})
                continue
            obj, index = got
            results.append({"obj": _encode(obj), "index": _index(index), "groups": _groups(obj)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


def shared_write(sub, files):
    """Each file holds a list whose first two tensors share a storage: write into the first, read the second."""
    folder = tempfile.mkdtemp()
    results = []
    for k, case in enumerate(files):
        path = os.path.join(folder, f"shared{k}.pt")
        with open(path, "wb") as f:
            f.write(np.asarray(case["data"], np.uint8).tobytes())
        try:
            obj, _ = sub.load_checkpoint(path)
            first, second = obj[0], obj[1]
            first.fill_(case["fill"])
            results.append({"second": _tensor(second)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


# -- part onnx -------------------------------------------------------------------------------------------------
# The learner side exports (through the learner's log_cosh_onnx / export_onnx) and answers the ONNX model's bytes;
# onnx_run runs in the clean room (P0's confined process, none of the learner's cells loaded): it parses the
# bytes, refuses external data and foreign domains, checks the model and runs it in onnxruntime on P0's inputs.
ONNX_MAX_BYTES = 8 << 20


def _quiet_onnx():
    import logging
    import warnings
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")


def _onnx_error(exc):
    """The exporter wraps the real error (a translation that raised, a shape it cannot handle) in a ConversionError
    or TorchExportError with colour codes and advice: answer the outer type, its first line and the innermost cause."""
    import re

    def line(e):
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
        return text.splitlines()[0].split(" Next steps")[0][:160] if text else ""

    inner, seen = exc, 0
    while inner.__cause__ is not None and seen < 8:
        inner, seen = inner.__cause__, seen + 1
    message = line(exc)
    if inner is not exc:
        message += f" ... caused by {type(inner).__name__}: {line(inner)}"
    return {"error": type(exc).__name__, "message": message[:300]}


def _onnx_bytes(data):
    if not isinstance(data, (bytes, bytearray)):
        return {"returned": type(data).__name__[:60]}
    if len(data) > ONNX_MAX_BYTES:
        return {"too_big": len(data)}
    return {"model": np.frombuffer(bytes(data), dtype=np.uint8).copy()}


def _onnx_model(spec):
    from torch import nn

    weights = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in spec["weights"].items()}
    temps = [float(t) for t in spec["temps"]]
    log_cosh = torch.ops.lab11.log_cosh

    def linear(prefix):
        w = weights[prefix + ".weight"]
        layer = nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype)
        return layer

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = linear("fc1"), linear("fc2")

        def forward(self, x):
            return self.fc2(log_cosh(self.fc1(x), temps[0]))

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fx, self.fy = linear("fx"), linear("fy")

        def forward(self, x, y):  # the inputs never meet: only the export can say that they share the batch
            return log_cosh(self.fx(x), temps[0]), log_cosh(self.fy(y), temps[1])

    model = {"mlp": Mlp, "two_inputs": TwoInputs}[spec["kind"]]()
    model.load_state_dict(weights)
    return model.eval()


def onnx_export(sub, spec):
    """The learner's export_onnx on P0's model (built here from P0's weights) and example inputs."""
    _quiet_onnx()
    try:
        model = _onnx_model(spec)
        example = tuple(torch.from_numpy(np.array(a, copy=True)) for a in spec["example"])
        return _onnx_bytes(sub.export_onnx(model, example))
    except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
        return _onnx_error(exc)


def onnx_translate(sub, example, temps):
    """torch.onnx.export of a module that applies log_cosh once per temperature, with the learner's translation."""
    _quiet_onnx()
    from torch import nn

    class Temps(nn.Module):
        def forward(self, x):
            return tuple(torch.ops.lab11.log_cosh(x, float(t)) for t in temps)

    try:
        x = torch.from_numpy(np.array(example, copy=True))
        program = torch.onnx.export(Temps(), (x,), dynamo=True, verbose=False,
                                    dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=1024)},),
                                    custom_translation_table={torch.ops.lab11.log_cosh.default: sub.log_cosh_onnx})
        return _onnx_bytes(program.model_proto.SerializeToString())
    except Exception as exc:  # noqa: BLE001
        return _onnx_error(exc)


def _onnx_tensors(message):
    """Every TensorProto inside an ONNX protobuf message (initializers, attributes, subgraphs, functions)."""
    import onnx
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for item in ([value] if hasattr(value, "ListFields") else value):
            if isinstance(item, onnx.TensorProto):
                yield item
            yield from _onnx_tensors(item)


def _onnx_nodes(message):
    """Every NodeProto inside an ONNX protobuf message: the graph's, subgraphs' (If, Loop, Scan) and functions'."""
    import onnx
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for item in ([value] if hasattr(value, "ListFields") else value):
            if isinstance(item, onnx.NodeProto):
                yield item
            yield from _onnx_nodes(item)


def onnx_run(sub, model, feeds):
    """Clean room only. Validate the model, then run it once per feed (a list of input arrays, in order)."""
    import onnx
    import onnxruntime as ort

    data = np.asarray(model, np.uint8).tobytes()
    if len(data) > ONNX_MAX_BYTES:
        return {"invalid": f"the model has {len(data)} bytes, more than {ONNX_MAX_BYTES}"}
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"the bytes are not an ONNX model ({type(exc).__name__})"}
    if any(t.data_location == onnx.TensorProto.EXTERNAL or len(t.external_data) for t in _onnx_tensors(proto)):
        return {"invalid": "the model refers to external data (its weights must be inside the file)"}
    local = {(f.domain, f.name) for f in proto.functions}
    foreign = sorted({o.domain for o in proto.opset_import} - {"", "ai.onnx"} - {d for d, _ in local})
    used = sorted({f"{n.domain}.{n.op_type}" for n in _onnx_nodes(proto)
                   if n.domain not in ("", "ai.onnx") and (n.domain, n.op_type) not in local})
    if foreign or used:
        return {"invalid": f"the model uses operators outside the standard ONNX domain: {(foreign + used)[:4]}"}
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"onnx.checker rejects the model: {str(exc)[:300]}"}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = False
    options.add_session_config_entry("session.load_model_format", "ONNX")   # no ORT-format models
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting threads
    # no custom-op library is registered (register_custom_ops_library is never called): the model can only name
    # operators that onnxruntime itself implements, and only standard ONNX ones pass the check above
    try:
        session = ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"onnxruntime cannot load the model: {str(exc)[:300]}"}
    inputs = session.get_inputs()
    shapes = [[d if isinstance(d, int) else ("?" if d is None else str(d)) for d in i.shape] for i in inputs]
    results = []
    for feed in feeds:
        if len(feed) != len(inputs):
            results.append({"error": "InputCount", "message": f"the model takes {len(inputs)} inputs, not {len(feed)}"})
            continue
        try:
            outs = session.run(None, {i.name: np.asarray(a) for i, a in zip(inputs, feed, strict=True)})
            results.append({"outputs": [np.asarray(o) if isinstance(o, np.ndarray) else repr(type(o)) for o in outs]})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return {"inputs": shapes, "ops": [n.op_type for n in proto.graph.node], "results": results}

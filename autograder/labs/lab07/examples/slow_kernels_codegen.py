# IPT-CANARY lab07 examples/slow_kernels_codegen.py: learner-written cell of slow_kernels.ipynb, hidden grading text
def c_const(value):
    """A Python number as a C float constant."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    return f"((float){value!r})"


def c_expr(target, args, kwargs):
    a = args[0]
    b = args[1] if len(args) > 1 else None
    alpha = kwargs.get("alpha")
    if target in (aten.add.Tensor, aten.add.Scalar):
        return f"({a} + {b})" if alpha is None else f"({a} + {c_const(alpha)} * {b})"
    if target in (aten.sub.Tensor, aten.sub.Scalar):
        return f"({a} - {b})" if alpha is None else f"({a} - {c_const(alpha)} * {b})"
    if target in (aten.mul.Tensor, aten.mul.Scalar):
        return f"({a} * {b})"
    if target in (aten.div.Tensor, aten.div.Scalar):
        return f"({a} / {b})"
    unary = {
        aten.neg.default: "(-{a})", aten.exp.default: "expf({a})", aten.log.default: "logf({a})",
        aten.sqrt.default: "sqrtf({a})", aten.rsqrt.default: "(1.0f / sqrtf({a}))",
        aten.reciprocal.default: "(1.0f / {a})", aten.sigmoid.default: "(1.0f / (1.0f + expf(fminf(-{a}, 88.0f))))",
        aten.tanh.default: "tanhf({a})", aten.sin.default: "sinf({a})", aten.cos.default: "cosf({a})",
        aten.abs.default: "fabsf({a})", aten.relu.default: "fmaxf({a}, 0.0f)", aten.erf.default: "erff({a})",
        aten.log1p.default: "log1pf({a})", aten.expm1.default: "expm1f({a})",
    }
    if target in unary:
        return unary[target].format(a=a)
    if target == aten.pow.Tensor_Scalar:
        return f"({a} * {a})" if b == c_const(2) else f"powf({a}, {b})"
    if target == aten.maximum.default:
        return f"fmaxf({a}, {b})"
    if target == aten.minimum.default:
        return f"fminf({a}, {b})"
    if target == aten.where.self:
        return f"({a} != 0.0f ? {b} : {args[2]})"
    compare = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
    if target.overloadpacket.__name__ in compare and target in POINTWISE_OPS:
        return f"(({a} {compare[target.overloadpacket.__name__]} {b}) ? 1.0f : 0.0f)"
    if target == aten.clamp.default:
        lo = args[1] if len(args) > 1 else kwargs.get("min")
        hi = args[2] if len(args) > 2 else kwargs.get("max")
        out = a
        if lo is not None and lo != "None":
            out = f"fmaxf({out}, {lo})"
        if hi is not None and hi != "None":
            out = f"fminf({out}, {hi})"
        return out
    raise NotImplementedError(f"no C expression for {target}")


def index_mode(shape, iteration_shape):
    """How a kernel reads an input of `shape` inside a loop over `iteration_shape`:
    ("flat",) -> p[i]; ("scalar",) -> p[0]; ("mod", m) -> p[i % m]; ("div", d) -> p[i / d]; ("expand",)."""
    S = list(iteration_shape)
    s = [1] * (len(S) - len(shape)) + list(shape)
    if s == S:
        return ("flat",)
    if math.prod(s) == 1:
        return ("scalar",)
    for k in range(len(S) + 1):
        if all(d == 1 for d in s[:k]) and s[k:] == S[k:]:
            return ("mod", math.prod(S[k:]))
    for k in range(len(S), -1, -1):
        if s[:k] == S[:k] and all(d == 1 for d in s[k:]):
            return ("div", math.prod(S[k:]))
    return ("expand",)


def generate_kernel(gm, group, name):
    nodes = {n.name: n for n in gm.graph.nodes}
    members = [nodes[m] for m in group]
    member_set = set(members)
    reduction = members[-1] if is_reduction(members[-1]) and not is_pointwise(members[-1]) else None
    pointwise = [m for m in members if m is not reduction]
    if reduction is not None:
        S = list(_val(reduction.args[0]).shape)
    else:
        S = list(_val(pointwise[-1]).shape)
    numel = math.prod(S)
    dims = reduction_dims(reduction) if reduction is not None else None
    if dims is not None and len(S) > 0 and sorted({d % len(S) for d in dims}) != list(range(len(S))):
        cols, rows = S[-1], math.prod(S[:-1])     # over the last dim only: one value per row
    else:
        cols, rows = numel, 1                     # over everything (however it is spelled): one value

    inputs, in_modes = [], []
    for m in members:
        for a in _tensor_args(m):
            if a not in member_set and a.name not in inputs:
                inputs.append(a.name)
                mode = index_mode(list(_val(a).shape), S)
                in_modes.append(mode if mode[0] != "expand" else ("expand", S))
    outputs = [m.name for m in members if any(u not in member_set for u in m.users)]
    if reduction is not None and reduction.name not in outputs:
        outputs.append(reduction.name)

    def ctype(node):
        return "unsigned char" if _val(node).dtype == torch.bool else "float"

    params = [f"const {ctype(nodes[n])}* restrict in{k}" for k, n in enumerate(inputs)]
    params += [f"{ctype(nodes[n])}* restrict out{k}" for k, n in enumerate(outputs)]
    body = []
    for k, (n, mode) in enumerate(zip(inputs, in_modes)):
        index = {"flat": "i", "expand": "i", "scalar": "0", "mod": f"(i % {mode[-1]})", "div": f"(i / {mode[-1]})"}[mode[0]]
        body.append(f"float v_{n} = (float)in{k}[{index}];")

    def arg_expr(a):
        if isinstance(a, fx.Node):
            return f"v_{a.name}"
        if isinstance(a, (bool, int, float)):
            return c_const(a)
        if a is None:
            return "None"
        raise NotImplementedError(f"argument {a!r} in a fused kernel")

    for m in pointwise:
        args = [arg_expr(a) for a in m.args]
        kwargs = {k: (v if not isinstance(v, fx.Node) else arg_expr(v)) for k, v in m.kwargs.items()}
        body.append(f"float v_{m.name} = {c_expr(m.target, args, kwargs)};")
    for k, n in enumerate(outputs):
        if reduction is not None and n == reduction.name:
            continue
        value = f"(unsigned char)(v_{n} != 0.0f)" if ctype(nodes[n]) == "unsigned char" else f"v_{n}"
        body.append(f"out{k}[i] = {value};")

    lines = ["#include <math.h>", "#include <stdint.h>", f"void {name}({', '.join(params)}) {{"]
    if reduction is None:
        lines.append(f"  for (int64_t i = 0; i < {numel}; i++) {{")
        lines += ["    " + b for b in body]
        lines.append("  }")
    else:
        x = f"v_{reduction.args[0].name}"
        is_max = reduction.target == aten.amax.default
        acc_type, init = ("float", "(-INFINITY)") if is_max else ("double", "0.0")
        update = f"acc = fmaxf(acc, {x});" if is_max else f"acc += {x};"
        final = f"acc / {cols}.0" if reduction.target == aten.mean.dim else "acc"
        out_k = outputs.index(reduction.name)
        lines.append(f"  for (int64_t r = 0; r < {rows}; r++) {{")
        lines.append(f"    {acc_type} acc = {init};")
        lines.append(f"    for (int64_t c = 0; c < {cols}; c++) {{")
        lines.append(f"      int64_t i = r * {cols} + c;")
        lines += ["      " + b for b in body]
        lines.append(f"      {update}")
        lines.append("    }")
        lines.append(f"    out{out_k}[r] = (float)({final});")
        lines.append("  }")
    lines.append("}")
    return Kernel(name=name, source="\n".join(lines) + "\n", inputs=inputs, outputs=outputs,
                  out_shapes=[list(_val(nodes[n]).shape) for n in outputs],
                  out_dtypes=[_val(nodes[n]).dtype for n in outputs], in_modes=in_modes, shape=S)


_BUILT = {}          # sha256 of the source -> loaded ctypes function
_BUILDS = [0]        # how many times cc ran


def build(source):
    key = hashlib.sha256(source.encode()).hexdigest()
    if key in _BUILT:
        return _BUILT[key]
    folder = os.path.join(tempfile.gettempdir(), "lab07-kernels")
    os.makedirs(folder, exist_ok=True)
    c_file, so_file = os.path.join(folder, f"{key[:20]}.c"), os.path.join(folder, f"{key[:20]}-{os.getpid()}.so")
    with open(c_file, "w") as f:
        f.write(source)
    for attempt in range(6):                 # fork can fail for a moment on a busy machine: retry
        try:
            proc = subprocess.run(["cc", "-O0", "-shared", "-fPIC", c_file, "-o", so_file, "-lm"], capture_output=True, text=True)
        except BlockingIOError:
            proc = None
        if proc is not None and (proc.returncode == 0 or "temporarily unavailable" not in proc.stderr):
            break
        time.sleep(0.1 * (attempt + 1))
    if proc is None or proc.returncode != 0:
        raise RuntimeError(f"cc failed:\n{proc.stderr[-2000:] if proc else 'could not start'}\n{source}")
    _BUILDS[0] += 1
    name = source.split("void ", 1)[1].split("(", 1)[0].strip()
    fn = getattr(ctypes.CDLL(so_file), name)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * source.split("void ", 1)[1].split(")", 1)[0].count("*")
    _BUILT[key] = fn
    return fn


def build_count():
    return _BUILDS[0]


def run_kernel(kernel, inputs):
    if kernel.fn is None:
        kernel.fn = build(kernel.source)
    args, keep = [], []
    for t, mode in zip(inputs, kernel.in_modes):
        if mode[0] == "expand":
            t = t.expand(mode[1])
        t = t.contiguous()
        keep.append(t)
        args.append(t.data_ptr())
    outs = [torch.empty(shape, dtype=dtype) for shape, dtype in zip(kernel.out_shapes, kernel.out_dtypes)]
    kernel.fn(*args, *[o.data_ptr() for o in outs])
    return outs

# IPT-CANARY lab11 test_checkpoint.py: hidden grading text, never shown to learners
"""Part `checkpoint`: load_checkpoint on archives P0 writes itself (storage keys, objects, dtypes and byte order
drawn from the grading seed), on torch.save's own archives, on files that name globals outside the lab's
allow-list (several of which torch.load(weights_only=True) accepts) and on corrupt archives.

Trust: values only. The expected objects are torch.load(weights_only=True) of the same bytes, read in P0; the
expected index is P0's writer's record. Every test holds archives with drawn storage keys, which torch.load
cannot report: handing the work to torch.load loses every test.
"""
import collections

import numpy as np
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab11 import oracle


def load(student, archives, what):
    files = [{"data": oracle.as_wire(data), "name": name} for data, _, name in archives]
    return replies.list_of(student.run("lab11.scenarios:load_checkpoint", files), f"{what}: load_checkpoint's results",
                           len(files))


def check_all(student, archives, what):
    got = load(student, archives, what)
    for k, ((data, index, _), reply) in enumerate(zip(archives, got, strict=True)):
        oracle.check_load(reply, data, index, f"{what}, file {k + 1}")


def drawn(rng, obj, big=None, folder=None):
    big = bool(rng.random() < 0.3) if big is None else big
    folder = folder or ["archive", "model", "ckpt_" + str(int(rng.integers(100)))][int(rng.integers(3))]
    keys = oracle.random_keys(rng)
    data, index = oracle.write_archive(obj, keys, big=big, folder=folder, order=rng)
    if not index:  # every drawn archive holds a tensor, so that its index names a drawn key
        data, index = oracle.write_archive([obj, oracle.random_tensor(rng, shape=(2,))], keys, big=big, folder=folder,
                                           order=rng)
    return data, index, folder + ".pt"


@pytest.mark.weight(4)
def test_objects_and_index(student):
    """Nested containers, every dtype, 0-d and size-0 tensors, views with offsets and strides, shared storages:
    the same objects as torch.load, and the index as written."""
    rng = case_rng(1)
    archives = [drawn(rng, [oracle.random_object(rng) for _ in range(3)]) for _ in range(5)]
    archives.append(drawn(rng, oracle.random_state_dict(rng), big=False))
    # an empty view whose other dims reach past its storage: empty, so within it (the statement's rule)
    wide = oracle.random_tensor(rng, torch.float32, (5,)).as_strided((int(rng.integers(2, 5)), 0), (10, 1))
    archives.append(drawn(rng, {"scalar": torch.tensor(float(rng.standard_normal())), "empty": torch.zeros(0, 3),
                                "empty_wide": wide,
                                "dtypes": [oracle.random_tensor(rng, dtype=d) for d in oracle.DTYPES]}))
    # every _rebuild_tensor_v2 call with its seventh argument (metadata)
    meta, meta_index = oracle.write_archive([oracle.random_object(rng) for _ in range(2)] + [oracle.random_tensor(rng)],
                                            oracle.random_keys(rng), writer_class=oracle.WithMetadata)
    archives.append((meta, meta_index, "meta.pt"))
    check_all(student, archives, "a checkpoint with drawn contents")


@pytest.mark.weight(2)
def test_torch_save_files(student):
    """Archives written by torch.save itself (keys 0, 1, ...), compared with torch.load; one with drawn keys."""
    rng = case_rng(2)
    sd = oracle.random_state_dict(rng)
    w = oracle.random_tensor(rng, torch.float32, (3, 4))
    objs = [sd, {"w": w, "wt": w.t(), "row": w[int(rng.integers(3))], "n": int(rng.integers(100))},
            [oracle.random_tensor(rng) for _ in range(3)]]
    archives = []
    for obj in objs:
        data = oracle.torch_archive(obj)
        _, index = oracle.write_archive(obj)  # the same pickle order and keys 0, 1, ... as torch.save
        archives.append((data, index, "saved.pt"))
    archives.append(drawn(rng, objs[1]))
    check_all(student, archives, "a torch.save checkpoint")


@pytest.mark.weight(2)
def test_shared_storages_stay_shared(student):
    """A write into one view shows in the other view of the same storage (and the file's values load)."""
    rng = case_rng(3)
    cases = []
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        base = oracle.random_tensor(rng, dtype, (3, 4))
        fill = int(rng.integers(1, 50))
        data, _ = oracle.write_archive([base, base.t(), oracle.random_tensor(rng)], oracle.random_keys(rng))
        want = base.t().clone().fill_(fill)
        cases.append(({"data": oracle.as_wire(data), "fill": fill}, want))
    got = replies.list_of(student.run("lab11.scenarios:shared_write", [c for c, _ in cases]), "shared writes", len(cases))
    for (case, want), reply in zip(cases, got, strict=True):
        what = f"a {str(want.dtype)[6:]} weight saved with its transpose, after filling the loaded weight with {case['fill']}"
        err = replies.error_reply(reply, what)
        assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
        reply = replies.dict_of(reply, {"second"}, what)
        want_values = want.to(torch.float32) if want.dtype == torch.bfloat16 else want
        oracle.check_tensor(reply["second"], want_values.numpy(), f"{what}: the transpose", str(want.dtype)[6:])
    # a trainable weight saved with a view of the same storage: requires_grad does not end the sharing
    w = oracle.random_tensor(rng, torch.float32, (int(rng.integers(2, 5)), 3)).requires_grad_(True)
    trainable = drawn(rng, [w, w.detach()[int(rng.integers(2)):].t(), oracle.random_object(rng)])
    check_all(student, [drawn(rng, [oracle.random_object(rng) for _ in range(2)]), trainable],
              "a checkpoint with drawn contents")


@pytest.mark.weight(3)
def test_allow_list(student):
    """Every forbidden global raises UnsafeCheckpointError naming it; clean files in the same run load."""
    rng = case_rng(4)
    forbidden = oracle.forbidden_objects()
    order = rng.permutation(len(forbidden))
    files, wants = [], []
    for i in order:
        obj, name = forbidden[int(i)]
        clean = [oracle.random_object(rng) for _ in range(2)]
        where = int(rng.integers(3))
        content = [*clean[:where], obj, *clean[where:]] if rng.random() < 0.5 else collections.OrderedDict(
            a=clean[0], evil=obj, b=clean[1])
        data, _ = oracle.write_archive(content, oracle.random_keys(rng))
        assert oracle.first_forbidden(data) == name, f"internal: {name} is not the first forbidden global"
        files.append((data, None, "file.pt"))
        wants.append(name)
    clean = [drawn(rng, [oracle.random_object(rng) for _ in range(3)]) for _ in range(2)]
    got = load(student, files + clean, "the allow-list")
    for (data, _, _), name, reply in zip(files, wants, got[:len(files)], strict=True):
        oracle.expect_error(reply, "UnsafeCheckpointError", f"a checkpoint that names {name}", name)
    for k, ((data, index, _), reply) in enumerate(zip(clean, got[len(files):], strict=True)):
        oracle.check_load(reply, data, index, f"a clean checkpoint loaded beside forbidden ones, file {k + 1}")


def _truncate(key, cut):
    return lambda member, data: data[:max(0, len(data) - cut)] if member == f"data/{key}" else data


def _drop(key):
    return lambda member, data: None if member == f"data/{key}" else data


@pytest.mark.weight(3)
def test_corrupt_archives(student):
    """Missing and truncated storages, a bad byte order, a tensor reaching past its storage, no data.pkl, not a
    zip: CorruptCheckpointError; big-endian and little-endian files of every dtype load."""
    rng = case_rng(5)
    keys = oracle.random_keys(rng)
    obj = {"a": oracle.random_tensor(rng, torch.float32, (int(rng.integers(2, 6)), 3)),
           "b": oracle.random_tensor(rng, torch.int64, (int(rng.integers(1, 5)),))}
    first, second = keys(0), keys(1)
    bad = [(oracle.write_archive(obj, keys, change=_drop(second))[0], "an archive without one of its storages"),
           (oracle.write_archive(obj, keys, change=_truncate(first, int(rng.integers(1, 4))))[0],
            "a storage that lost its last bytes"),
           (oracle.write_archive(obj, keys, change=lambda m, d: b"middle" if m == "byteorder" else d)[0],
            "an unknown byte order"),
           (oracle.write_archive(obj, keys, change=lambda m, d: None if m == "data.pkl" else d)[0], "no data.pkl"),
           (bytes(rng.integers(0, 256, size=64, dtype=np.uint8)), "bytes that are not a zip archive")]
    base = oracle.random_tensor(rng, torch.float32, (4,))
    past = base[int(rng.integers(1, 4)):]
    bad.append((_past_end(past, keys), "a tensor that reaches past the end of its storage"))
    head = oracle.random_tensor(rng, torch.float32, (int(rng.integers(6, 10)),))
    cut = int(rng.integers(1, 3))
    bad.append((oracle.write_archive([head[:2]], keys, change=_truncate(keys(0), 4 * cut))[0],
                "a storage short of whole elements its tensor does not use"))
    small = {"t": oracle.random_tensor(rng, torch.float32, (3,))}
    for kind in ("int key", "list", "module"):
        pid_keys = str if kind == "int key" else keys
        bad.append((oracle.write_archive(small, pid_keys, writer_class=oracle.BadPid.writer(kind))[0],
                    f"a persistent id that is not ('storage', class, str key, location, int numel) ({kind})"))
    bad.append((oracle.write_archive(obj, keys, change=lambda m, d: d[:len(d) // 2] if m == "data.pkl" else d)[0],
                "a data.pkl cut in half"))
    flat = oracle.write_archive(obj, keys)[0]
    bad.append((oracle.rewrite_members(flat, lambda name: name.split("/", 1)[1]), "a data.pkl at the archive's root"))
    extra = int(rng.integers(1, 9))
    bad.append((oracle.write_archive(obj, keys, change=lambda m, d: d + bytes(extra) if m == f"data/{first}" else d)[0],
                "a storage with bytes beyond what its numel needs"))
    bad.append((oracle.write_archive([oracle.random_tensor(rng), oracle.Forbidden(torch._utils._rebuild_tensor_v2,
                                                                                   ("x", int(rng.integers(5))))], keys)[0],
                "a _rebuild_tensor_v2 call with two arguments"))
    good = [drawn(rng, {"all": [oracle.random_tensor(rng, dtype=d) for d in oracle.DTYPES]}, big=big) for big in (True, False)]
    old, old_index = oracle.write_archive([oracle.random_tensor(rng, dtype=d) for d in oracle.DTYPES], keys,
                                          change=lambda m, d: None if m == "byteorder" else d)
    good.append((old, old_index, "old.pt"))  # an old archive without a byteorder member: little-endian
    got = load(student, [(d, None, "bad.pt") for d, _ in bad] + good, "corrupt archives")
    for (_, what), reply in zip(bad, got[:len(bad)], strict=True):
        oracle.expect_error(reply, "CorruptCheckpointError", what)
    for k, ((data, index, _), reply) in enumerate(zip(good, got[len(bad):], strict=True)):
        kind = ["a big-endian", "a little-endian", "an old (no byteorder member)"][k]
        oracle.check_load(reply, data, index, f"{kind} checkpoint of every dtype")


def _past_end(view, keys):
    """An archive whose pickle says numel = the view's last element (so the view's last element is outside)."""
    import io
    import zipfile

    class Short(oracle._Writer):
        def persistent_id(self, obj):
            pid = super().persistent_id(obj)
            return None if pid is None else (*pid[:4], pid[4] - 1)

    buf = io.BytesIO()
    writer = Short(buf, keys)
    writer.dump([view])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", b"little")
        for key, st, dtype in writer.storages.values():
            z.writestr(f"archive/data/{key}", oracle.storage_bytes(st, dtype, False))
    return out.getvalue()

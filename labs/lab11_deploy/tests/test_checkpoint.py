"""Public tests of part `checkpoint` (run them with check("checkpoint"))."""
import collections
import io
import os
import zipfile

import pytest
import torch


def saved(obj, tmp_path, name="ckpt.pt"):
    path = os.path.join(tmp_path, name)
    torch.save(obj, path)
    return path


def rewritten(path, change):
    """A copy of the archive at `path` with change(name, bytes) -> bytes or None (None drops the member)."""
    out = path + ".changed.pt"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            data = change(name, src.read(name))
            if data is not None:
                dst.writestr(name, data)
    return out


def expect(lab, exc, path, what, names=None):
    cls = getattr(lab, exc)
    try:
        lab.load_checkpoint(path)
    except NotImplementedError:
        raise
    except cls as e:
        assert names is None or names in str(e), f"{what}: the {exc}'s message should name {names!r}, got {e}"
        return
    except Exception as e:  # noqa: BLE001 - the type is the point
        pytest.fail(f"{what} should raise {exc}, got {type(e).__name__}: {e}", pytrace=False)
    pytest.fail(f"{what} should raise {exc}, but loaded", pytrace=False)


def same(got, want, where="obj"):
    assert type(got) is type(want), f"{where}: expected {type(want).__name__}, got {type(got).__name__}"
    if isinstance(want, torch.Tensor):
        assert (got.dtype, got.shape, got.stride(), got.storage_offset()) == (want.dtype, want.shape, want.stride(), want.storage_offset()), (
            f"{where}: dtype/size/stride/offset {(got.dtype, tuple(got.shape), got.stride(), got.storage_offset())}, "
            f"expected {(want.dtype, tuple(want.shape), want.stride(), want.storage_offset())}")
        assert torch.equal(got, want), f"{where}: values differ from torch.load's"
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)}, expected {list(want)}"
        for k in want:
            same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{where}: length {len(got)}, expected {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{k}]")
    else:
        assert got == want, f"{where}: {got!r}, expected {want!r}"


def test_same_as_torch_load(lab, tmp_path):
    w = torch.arange(12.0).reshape(3, 4)
    obj = {"sd": collections.OrderedDict(w=w, wt=w.t(), row=w[1, 1:]), "h": torch.ones(2, 2, dtype=torch.bfloat16),
           "trainable": torch.zeros(3).requires_grad_(),
           "mask": torch.tensor([True, False]), "step": 3, "names": ["a", None, 1.5], "pair": (torch.tensor(7), torch.zeros(0, 3))}
    path = saved(obj, tmp_path)
    got, index = lab.load_checkpoint(path)
    same(got, torch.load(path, weights_only=True))
    got["sd"]["w"][0, 1] = 100.0
    assert got["sd"]["wt"][1, 0] == 100.0, "w and its transpose share a storage: a write into one must show in the other"


def test_index(lab, tmp_path):
    w = torch.arange(6, dtype=torch.int16).reshape(2, 3)
    path = saved([w, w.t(), w[1], torch.ones(3)], tmp_path)
    _, index = lab.load_checkpoint(path)
    want = [{"key": "0", "dtype": torch.int16, "offset": 0, "size": (2, 3), "stride": (3, 1)},
            {"key": "0", "dtype": torch.int16, "offset": 0, "size": (3, 2), "stride": (1, 3)},
            {"key": "0", "dtype": torch.int16, "offset": 3, "size": (3,), "stride": (1,)},
            {"key": "1", "dtype": torch.float32, "offset": 0, "size": (3,), "stride": (1,)}]
    assert index == want, f"index should be {want}, got {index}"


def test_big_endian(lab, tmp_path):
    t = torch.tensor([1.5, -2.0, 3.25])
    path = saved({"t": t}, tmp_path)

    def to_big(name, data):
        if name.endswith("/byteorder"):
            return b"big"
        if "/data/" in name and not name.endswith("serialization_id"):
            return bytes(b for k in range(0, len(data), 4) for b in reversed(data[k:k + 4]))
        return data
    got, _ = lab.load_checkpoint(rewritten(path, to_big))
    assert torch.equal(got["t"], t), f"a big-endian archive of {t.tolist()} loaded as {got['t'].tolist()}"


class Sneaky:
    def __reduce__(self):
        return (os.system, ("echo you have been warned",))


def test_allow_list(lab, tmp_path):
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2), "payload": Sneaky()}, buf)
    evil = os.path.join(tmp_path, "evil.pt")
    with open(evil, "wb") as f:
        f.write(buf.getvalue())
    expect(lab, "UnsafeCheckpointError", evil, "a checkpoint that calls os.system", f"{os.system.__module__}.system")
    expect(lab, "UnsafeCheckpointError", saved({"shape": torch.Size([2, 3])}, tmp_path, "size.pt"),
           "a checkpoint holding a torch.Size (torch.load accepts it; the lab's allow-list does not)", "torch.Size")
    got, _ = lab.load_checkpoint(saved({"shape": [2, 3]}, tmp_path, "list.pt"))
    assert got == {"shape": [2, 3]}, f"a plain list should load, got {got!r}"


def test_corrupt(lab, tmp_path):
    path = saved({"a": torch.ones(4), "b": torch.zeros(2, dtype=torch.int64)}, tmp_path)
    expect(lab, "CorruptCheckpointError", rewritten(path, lambda n, d: None if n.endswith("/data/1") else d),
           "an archive without the storage of 'b'")
    expect(lab, "CorruptCheckpointError", rewritten(path, lambda n, d: d[:-3] if n.endswith("/data/0") else d),
           "an archive whose storage 0 lost its last 3 bytes")
    expect(lab, "CorruptCheckpointError", rewritten(path, lambda n, d: b"middle" if n.endswith("/byteorder") else d),
           "an archive with byte order 'middle'")
    expect(lab, "CorruptCheckpointError", rewritten(path, lambda n, d: None if n.endswith("/data.pkl") else d),
           "an archive without data.pkl")
    not_zip = os.path.join(tmp_path, "notes.txt")
    with open(not_zip, "w") as f:
        f.write("not a checkpoint")
    expect(lab, "CorruptCheckpointError", not_zip, "a text file")

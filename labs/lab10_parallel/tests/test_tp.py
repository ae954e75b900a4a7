"""Public tests of part `tp` (run them with check("tp"))."""
import numpy as np
import torch
import torch.nn.functional as F
from labkit.testing import raises
from labkit.world import run_world


def test_mlp_forward_and_backward_equal_the_dense_block(lab):
    def program(x, w1, b1, w2, b2):
        x.requires_grad_(True)
        up, down = lab.ColumnParallelLinear(w1, b1), lab.RowParallelLinear(w2, b2)
        out = down(F.gelu(up(x)))
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        return [out, x.grad, up.weight.grad, down.weight.grad, down.bias.grad]

    rng = np.random.default_rng(0)
    tensors = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (6, 4), (6,), (4, 6), (4,))]
    ranks = run_world(program, 2, [tensors, tensors])
    x, w1, b1, w2, b2 = (torch.from_numpy(t).requires_grad_(True) for t in tensors)
    dense = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    (dense * torch.arange(dense.numel()).view_as(dense)).sum().backward()
    for rank, (out, gx, gw1, gw2, gb2) in enumerate(ranks):
        assert np.allclose(out, dense.detach().numpy(), atol=1e-5), f"rank {rank}: the output differs from the dense block"
        assert np.allclose(gx, x.grad.numpy(), atol=1e-5), f"rank {rank}: the input's gradient differs (does f all-reduce it?)"
        assert np.allclose(gw1, w1.grad[3 * rank:3 * rank + 3].numpy(), atol=1e-5), f"rank {rank}: the column slice's gradient differs"
        assert np.allclose(gw2, w2.grad[:, 3 * rank:3 * rank + 3].numpy(), atol=1e-5), f"rank {rank}: the row slice's gradient differs"
        assert np.allclose(gb2, b2.grad.numpy(), atol=1e-5), f"rank {rank}: the row-parallel bias gradient differs"


def test_indivisible_features_raise(lab):
    def program(w, b):
        with raises(ValueError, "ColumnParallelLinear with 5 output features on 2 ranks"):
            lab.ColumnParallelLinear(w, b)
        return lab.ColumnParallelLinear(w[:4], b[:4]).weight.detach()

    w, b = np.ones((5, 3), np.float32), np.zeros(5, np.float32)
    ranks = run_world(program, 2, [[w, b], [w, b]])
    assert ranks[0][0].shape == (2, 3), f"a 4x3 weight on 2 ranks should leave a 2x3 slice, got {ranks[0][0].shape}"

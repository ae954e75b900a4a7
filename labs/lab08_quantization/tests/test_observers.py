"""Public tests of part `observers` (run them with check("observers"))."""
import torch
from labkit.testing import raises


def test_min_max_per_tensor(lab):
    obs = lab.MinMaxObserver(0, 255, symmetric=False)
    x = torch.tensor([[-1.0, 2.0], [0.5, 0.25]])
    assert obs(x) is x, "forward(x) should return x itself"
    obs(torch.tensor([3.0, -0.5]))
    assert obs.min_val.item() == -1.0 and obs.max_val.item() == 3.0, f"after [-1, 2, 0.5, 0.25] and [3, -0.5] the range should be [-1, 3], got [{obs.min_val}, {obs.max_val}]"
    scale, zp = obs.calculate_qparams()
    assert torch.equal(scale, torch.tensor(4.0 / 255)) and zp.item() == 64, f"qparams of [-1, 3] in [0, 255] should be scale 4/255 and zero point 64, got {scale}, {zp}"


def test_per_channel(lab):
    obs = lab.MinMaxObserver(-128, 127, symmetric=True, axis=1)
    obs(torch.tensor([[1.0, -2.0, 0.0], [3.0, 1.0, 0.5]]))
    assert obs.min_val.tolist() == [1.0, -2.0, 0.0] and obs.max_val.tolist() == [3.0, 1.0, 0.5], f"per channel (axis=1) the ranges should be min [1, -2, 0] and max [3, 1, 0.5], got {obs.min_val.tolist()} and {obs.max_val.tolist()}"


def test_moving_average(lab):
    obs = lab.MinMaxObserver(0, 255, symmetric=False, averaging_constant=0.5)
    obs(torch.tensor([0.0, 4.0]))
    obs(torch.tensor([-2.0, 2.0]))
    assert obs.min_val.item() == -1.0 and obs.max_val.item() == 3.0, f"c=0.5: [0, 4] then [-2, 2] should give [-1, 3], got [{obs.min_val.item()}, {obs.max_val.item()}]"


def test_no_data(lab):
    with raises(RuntimeError, "calculate_qparams() before any data"):
        lab.MinMaxObserver(0, 255, symmetric=False).calculate_qparams()


def test_histogram_bins_and_range(lab):
    obs = lab.HistogramObserver(0, 255, symmetric=False, bin_width=1.0)
    x = torch.tensor([[-1.5, 0.0, 0.99], [2.0, -0.1, 3.5]])
    assert obs(x) is x, "forward(x) should return x itself"
    assert obs.bins == {-2: 1, -1: 1, 0: 2, 2: 1, 3: 1}, f"width 1: [-1.5, 0, 0.99, 2, -0.1, 3.5] should fill bins {{-2: 1, -1: 1, 0: 2, 2: 1, 3: 1}}, got {obs.bins}"
    lo, hi = obs.range()
    assert (lo.item(), hi.item()) == (-2.0, 4.0), f"tail=0: the range should run from bin -2's left edge to bin 3's right edge, [-2, 4], got [{lo.item()}, {hi.item()}]"
    scale, zp = obs.calculate_qparams()
    assert torch.equal(scale, torch.tensor(6.0 / 255)) and zp.item() == 85, f"qparams of [-2, 4] in [0, 255] should be scale 6/255 and zero point 85, got {scale}, {zp}"


def test_histogram_tail(lab):
    obs = lab.HistogramObserver(-128, 127, symmetric=True, bin_width=0.5, tail=0.1)
    obs(torch.cat([torch.linspace(-1, 1, 18), torch.tensor([-30.0, 50.0])]))
    lo, hi = obs.range()
    assert (lo.item(), hi.item()) == (-1.0, 1.0), f"20 values, tail=0.1: drop 2 at each end; the range should be [-1, 1] (the bins of the 3rd smallest and 3rd largest values), got [{lo.item()}, {hi.item()}]"


def test_histogram_errors(lab):
    with raises(ValueError, "bin_width=0.3 (not a power of two)"):
        lab.HistogramObserver(0, 255, symmetric=False, bin_width=0.3)
    obs = lab.HistogramObserver(0, 255, symmetric=False, bin_width=0.25)
    with raises(RuntimeError, "range() before any data"):
        obs.range()
    with raises(ValueError, "a batch holding NaN"):
        obs(torch.tensor([1.0, float("nan")]))
    assert obs.bins == {}, f"a refused batch should change nothing, got bins {obs.bins}"

# IPT-CANARY lab03 examples/shortcuts_per_sample_grads.py: learner-written cell of shortcuts.ipynb, hidden grading text
def per_sample_grads(model, loss_fn, x, y):
    """{name: (B, *shape)} per-sample gradients, with vmap(grad(...))."""
    return per_sample_grads_loop(model, loss_fn, x, y)  # same values, and no vmap to get right


def per_sample_grads_loop(model, loss_fn, x, y):
    """The same, one sample at a time."""
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    per_sample = {name: [] for name in names}
    for b in range(x.shape[0]):
        loss = loss_fn(model(x[b:b + 1]), y[b:b + 1])
        for name, g in zip(names, torch.autograd.grad(loss, params)):
            per_sample[name].append(g)
    return {name: torch.stack(gs) for name, gs in per_sample.items()}

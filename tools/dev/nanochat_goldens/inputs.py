"""What a golden's numbers start from: noise on nanochat's initial weights, and random tokens."""

import torch


def perturb_(model, generator, std):
    """Adds N(0, std^2) noise to every parameter, in state-dict order."""
    if std == 0:
        return
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=torch.float32) * std)


def random_batch(generator, batch, seq, vocab, ignored=0):
    idx = torch.randint(0, vocab, (batch, seq), generator=generator)
    targets = torch.randint(0, vocab, (batch, seq), generator=generator)
    if ignored:
        positions = torch.randperm(batch * seq, generator=generator)[:ignored]
        targets.view(-1)[positions] = -1
    return idx, targets

"""GSN-FT (paper eq. 7): when the gradient-sensitivity norm κ of the must_fix cases is too low for
a low-rank step to move them, fine-tune the head on the aux cases and keep the step of largest κ."""

from __future__ import annotations

import numpy as np

from warp_check.model.activations import torch_activation
from warp_check.model.head import DenseHead, top_left_singular_vectors
from warp_check.repair.records import CaseSet, GsnFtRecord
from warp_check.repair.settings import RepairSettings


def gsn_finetune(
    head: DenseHead, fix: CaseSet, aux: CaseSet, settings: RepairSettings
) -> tuple[DenseHead, GsnFtRecord]:
    """Fine-tune W, b, W_c, b_c on aux cases; keep the step of largest mean κ over must_fix.

    Step 0 (no change) is a candidate, so GSN-FT never lowers κ (paper eq. 7).
    """
    import torch

    generator = torch.Generator().manual_seed(settings.seed)
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (head.W, head.b, head.Wc, head.bc)]
    act = torch_activation(head.activation.torch_name)
    optimiser = torch.optim.Adam(params, lr=settings.gsn_ft_lr)
    Va = torch.tensor(np.asarray(aux.V, dtype=np.float64))  # float64 as the head's parameters
    ya = torch.tensor(aux.labels)

    def snapshot() -> DenseHead:
        W, b, Wc, bc = (p.detach().numpy().copy() for p in params)
        W = head.round_to_storage(W)
        return DenseHead(
            W,
            head.round_to_storage(b),
            head.round_to_storage(Wc),
            head.round_to_storage(bc),
            head.activation,
            head.storage_dtype,
            decision=head.decision,
        )

    def mean_kappa(candidate: DenseHead) -> float:
        U = top_left_singular_vectors(candidate.W, settings.rank)
        return float(np.mean(candidate.gsn_kappa(fix.V, fix.labels, U)))

    best, kappas = head, [mean_kappa(head)]
    best_step = 0
    for step in range(1, settings.gsn_ft_steps + 1):
        batch = torch.randperm(len(aux), generator=generator)[: settings.gsn_ft_batch_size]
        W, b, Wc, bc = params
        logits = act(Va[batch] @ W.T + b) @ Wc.T + bc
        loss = head.decision.training_loss(logits, ya[batch])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        candidate = snapshot()
        kappas.append(mean_kappa(candidate))
        if kappas[-1] > kappas[best_step]:
            best, best_step = candidate, step
    reason = f"mean κ {kappas[0]:.4g} < gsn_threshold {settings.gsn_threshold:g}"
    return best, GsnFtRecord(best_step > 0, reason, tuple(kappas), best_step)
